"""The compiled one-token decode step: ``decode_graph.AnglesGivenStepGraph`` (a dense cache) and
``decode_graph.PagedStepGraph`` (a paged one) compiled whole, in the background, kept on disk.

Owns ``DecodeStep``, what ``load_model(compile=True)`` attaches to a model, and ``StepStatus``, what it
says about itself. The whole step (embedding, every block, final norm, output matrix) is one graph,
compiled ahead of time by AOTInductor (``torch.export`` + ``aoti_compile_and_package``, with inductor's
freezing and max-autotune) into a package on disk, so a step is one call into compiled C++: no Python
between layers and no guards to check. Every size in the graph is dynamic (rows, the cache's rows
and capacity, the key length), so the one graph serves every plain decode step: one request of
``generate`` or the stepper, a left-padded static batch, the slot pool of continuous batching; no
step ever recompiles. The paged graph serves the decode steps of the generation server's paged cache (its block
tables' width, the pool's blocks and the block size dynamic); a cache says which graph reads it (``decode_graph``,
"any" unless it says "paged").

Compiling never blocks a caller: it runs in a background thread that starts when the model loads;
until the graph is ready (or if compiling fails) the step runs eagerly through ``Transformer.forward``,
and ``status`` says which. The package is kept under ``cache_root()/compiled-steps/<key>``, where the
key digests the weights themselves, the config, the weights mode, the graph's shapes, the code that
defines it, torch's version, the CPU's instruction set and the kernel that multiplies by the weight
groups (``kernels.py``): a restart loads it in seconds, and another
model or mode can never pick it up. Two processes loading the same model (a process server's child
beside the app) share one compile through a file lock. The package is kept unpacked too (``unpack``), and the
step is loaded from that folder. The package keeps its weights beside its library,
and the loaded step is handed the model's own tensors (``package_constants``): no second copy is held.

Prefill, traced forwards, interventions and the GPT-2 family never take this path.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import ModelConfig
from .decode_graph import FAMILIES, AnglesGivenStepGraph, PagedStepGraph
from .kv_cache import DecodeView, PagedDecodeView
from .memory import release_freed_memory

INDUCTOR_OPTIONS = {
    "freezing": True,  # weights are constants the kernels see
    "max_autotune": True,
    # the weights are kept beside the library, not inside it: the loaded step reads the model's own tensors
    "aot_inductor.package_constants_in_so": False,
    "aot_inductor.package_constants_on_disk_format": "pickle_weights",
}
_SOURCES = (
    "decode_graph.py",
    "transformer.py",
    "quant.py",
    "quant_formats.py",
    "kernels.py",
    "native.py",
    "csrc/q8dot.cpp",
)  # the code a package compiles
PACKAGE_FORMAT = 4  # bump when ``export_graph`` (the inputs, their sizes) or the package's layout changes
GRAPHS = ("any", "paged")  # the graphs a step is compiled as ("any": a dense cache, "paged": a paged one; every size
# dynamic in both)


def compiler_problem() -> str | None:
    """Why the step cannot be compiled here (None when it can)."""
    if shutil.which("g++") is None and shutil.which("c++") is None:
        return "no C++ compiler (g++) on this machine"
    # found, not imported: torch._inductor imports torch._dynamo and sympy, which a step loaded from disk never needs
    missing = [name for name in ("torch._inductor", "torch.export") if importlib.util.find_spec(name) is None]
    if missing or not hasattr(torch._C, "_aoti"):
        return f"torch's compiler is unavailable in this build ({', '.join(missing) or 'no AOTInductor loader'})"
    return None


def load_package(path: Path):
    """The compiled step of the package at ``path`` (read from its unpacked folder, ``unpack``), without its weights
    (``load_constants`` hands them over), through torch's C++ loader: ``torch._inductor.aoti_load_package`` wraps the
    same loader but imports ``torch._dynamo`` and sympy on the way (~70 MiB of Python modules in every process that
    only runs the step). Call it with ``boxed_run(list of the graph's inputs)``; it returns the graph's outputs as a
    list."""
    return torch._C._aoti.AOTIModelPackageLoader(str(unpacked(path)), "model", False, 1, -1)  # one runner, the CPU


def unpacked(path: Path) -> Path:
    """Where the package at ``path`` is kept unpacked (``unpack``), beside it."""
    return path.with_name("unpacked")


def unpack(path: Path) -> Path:
    """The package at ``path`` unpacked beside it, once (the caller holds the package's lock); its folder.

    Why: given the zip, torch's loader extracts it into a temporary folder of its own at every load (5.5 MB a graph:
    the library and its sources) and removes it only when the loader is destroyed, which a killed process (a server
    stopped, a test's engine child) never does; given the folder, it reads the library where it is, and every process
    maps the same file."""
    import zipfile

    folder = unpacked(path)
    if not folder.exists():
        for stale in folder.parent.glob(f"{folder.name}.tmp*"):  # a killed process's half-unpacked folder
            shutil.rmtree(stale, ignore_errors=True)
        staging = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
        with zipfile.ZipFile(path) as archive:
            archive.extractall(staging)
        staging.rename(folder)
    return folder


@dataclass(frozen=True)
class StepStatus:
    """What the decode step runs now, as plain data (the sidebar shows ``line``)."""

    state: str  # "compiling", "ready" or "eager" (not compiled: ``detail`` says why)
    detail: str  # what happened, in words
    ready: tuple[str, ...] = ()  # the graphs in use
    seconds: float | None = None  # how long compiling (or loading from disk) took

    @property
    def line(self) -> str:
        if self.state == "compiling":
            return "compiling the fast step… (eager until then)"
        if self.state == "ready":
            return "compiled"
        return f"eager step ({self.detail})"


class DecodeStep:
    """The compiled decode step of one loaded model, shared by every request; see the module docstring."""

    def __init__(
        self,
        model,
        mode: str,
        cache_dir: Path,
        background: bool = True,
        graphs: tuple[str, ...] = GRAPHS,
        options: dict | None = None,
    ) -> None:
        self.mode = mode  # "float32", "bfloat16", "gguf", ... (part of the key, and said in the manifest)
        self.cache_dir = cache_dir
        self.options = dict(INDUCTOR_OPTIONS if options is None else options)  # inductor's (part of the key)
        # a copy of the module tree that shares the tensors: export swaps tensors on its modules, not the model's
        self._graph = AnglesGivenStepGraph(_sharing_copy(model)).eval()
        self._graphs = {"any": self._graph, "paged": PagedStepGraph(self._graph.model).eval()}  # one module tree
        self._cache_dtype = _cache_dtype(model)
        self._runners: dict[str, object] = {}
        self._constants: dict[str, dict[str, torch.Tensor]] = {}  # each runner's weights (``package_constants``)
        self._lock = threading.Lock()  # one compiled call at a time (the runners are not re-entrant)
        self._status = StepStatus("compiling", "compiling the decode step in the background")
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._build, args=(graphs,), name="compile-decode-step", daemon=True)
        if background:
            self._thread.start()
        else:
            self._build(graphs)

    def __deepcopy__(self, memo) -> None:
        return None  # a copied model (other weights, perhaps) starts without a compiled step

    # -- status ---------------------------------------------------------------------------------------
    @property
    def status(self) -> StepStatus:
        return self._status

    def wait(self, timeout: float | None = None) -> StepStatus:
        """Block until every graph is ready or has failed (tests, benchmarks, the command line)."""
        if self._thread.is_alive():
            self._thread.join(timeout)
        return self._status

    # -- the step -------------------------------------------------------------------------------------
    @staticmethod
    def applies(model, kv_cache, steps: int, trace) -> bool:
        """Whether this forward is a plain one-token step of a family the graph covers, through a cache."""
        return (
            steps == 1
            and trace is None
            and kv_cache is not None
            and hasattr(kv_cache, "decode_view")
            and model.config.family in FAMILIES
        )

    def __call__(self, input_ids: torch.Tensor, kv_cache, positions: torch.Tensor | None) -> torch.Tensor | None:
        """Logits (B, 1, V) of one step, its K/V written and committed; None when no compiled graph serves it
        (not ready yet, or not a plain decode step), so the caller runs the eager forward instead."""
        name = getattr(kv_cache, "decode_graph", "any")  # a paged cache is read by the paged graph
        runner = self._runners.get(name)
        if runner is None:
            return None
        view = kv_cache.decode_view(input_ids.shape[0])
        if view is None or not _fits(view, self._cache_dtype):
            return None
        if positions is None:  # (B, 1): no padding, so the column is the position
            positions = (view.held - 1 if isinstance(view, PagedDecodeView) else view.columns)[:, None]
        inputs = _graph_inputs(input_ids[:, 0], self._graph.rope_inputs(positions[:, 0]), view)
        try:
            with self._lock:
                logits, new_keys, new_values = runner.boxed_run(list(inputs))  # (B, V), (B, L, n_kv, hd) twice
        except RuntimeError as exc:  # a size outside the package's ranges: this step (and the next) run eagerly
            self._runners.pop(name, None)
            self._status = StepStatus(
                "eager", f"the compiled {name} step failed ({str(exc).splitlines()[0][:200]}); the eager step runs"
            )
            return None  # the eager forward computes the step instead
        if isinstance(view, PagedDecodeView):
            view.store(new_keys, new_values)  # into the blocks the step reserved
        else:
            view.keys[:, view.slots, :, view.columns] = new_keys  # every layer's new column, one indexed copy each
            view.values[:, view.slots, :, view.columns] = new_values
        kv_cache.commit()
        return logits[:, None]  # (B, 1, V)

    # -- compiling --------------------------------------------------------------------------------------
    def _build(self, graphs: tuple[str, ...]) -> None:
        try:
            notes = []
            for name in graphs:
                path, note = self._package(name)
                runner = load_package(path)
                constants = package_constants(path, self._graphs[name])
                runner.load_constants(constants, False, True, True, False)  # active set, full, user-managed, no copy
                self._constants[name] = constants  # the runner holds their pointers only: kept alive here
                self._runners[name] = runner
                notes.append(note)
            release_freed_memory()  # compiling (or reading the package) leaves large freed temporaries
            seconds = time.perf_counter() - self._started
            self._status = StepStatus("ready", "; ".join(notes), tuple(self._runners), seconds)
        except Exception as exc:  # any compiler failure leaves the eager step in place, and says why
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            self._status = StepStatus(
                "eager",
                f"compiling the decode step failed ({type(exc).__name__}: {first_line}); the eager step runs",
                tuple(self._runners),
            )

    def _package(self, name: str) -> tuple[Path, str]:
        """The package of graph ``name``: found on disk, or compiled now (under a lock other processes share)."""
        key, manifest = artifact_key(self._graph.model, self.mode, name, self.options)
        folder = self.cache_dir / key
        path = folder / "step.pt2"
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with open(self.cache_dir / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then finds the package
            if path.exists() and (folder / "manifest.json").exists():
                unpack(path)  # a package kept before packages were unpacked
                return path, f"{name}: loaded from disk"
            started = time.perf_counter()
            staging = folder.with_name(folder.name + f".tmp{os.getpid()}")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
            import torch._inductor  # compiling needs all of it (loading a package does not: ``load_package``)

            exported = export_graph(self._graphs[name], name)
            options, linking = dict(self.options), contextlib.nullcontext()
            if getattr(getattr(self._graph.model, "quantization", None), "kernel", None) == "q8dot":
                from . import native  # the step calls our kernels' C entry points, linked against their library

                options.update(native.compile_options())
                linking = native.linking()
            with linking:
                torch._inductor.aoti_compile_and_package(
                    exported, package_path=str(staging / "step.pt2"), inductor_configs=options
                )
            seconds = time.perf_counter() - started
            unpack(staging / "step.pt2")
            (staging / "manifest.json").write_text(json.dumps({**manifest, "compile_seconds": seconds}, indent=1))
            shutil.rmtree(folder, ignore_errors=True)
            staging.rename(folder)
            return path, f"{name}: compiled in {seconds:.0f} s"


def package_constants(path: Path, graph: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The weights a package's step reads, by name: the graph's own tensors wherever they are the very tensors it
    was compiled with (same name, shape, strides and offset; the package's key digests their dtypes and bytes),
    else the package's copy (the small constants inductor made, such as a kernel's group size, or a weight it
    folded into another form).

    Why: a package that embeds its weights holds a second copy of the model once loaded (128 MB for SmolLM2's
    4-bit blocks, mapped from the library and copied again); these tensors are handed to the runner as
    user-managed, so it reads the model's memory itself.
    """
    import io
    import zipfile

    own = dict(graph.named_parameters(remove_duplicate=False))
    own.update(graph.named_buffers(remove_duplicate=False))
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        config_name = next(n for n in names if n.endswith("/data/aotinductor/model/weights_config.json"))
        root = config_name.removesuffix("data/aotinductor/model/weights_config.json")
        constants = {}
        for fqn, (file, shape, stride, offset) in json.loads(archive.read(config_name)).items():
            mine = own.get(fqn)
            if mine is not None and (tuple(mine.shape), mine.stride(), mine.storage_offset()) == (
                tuple(shape),
                tuple(stride),
                offset,
            ):
                constants[fqn] = mine.detach()
                continue
            stored = torch.load(io.BytesIO(archive.read(f"{root}data/weights/{file}")), weights_only=True)
            constants[fqn] = stored.as_strided(shape, stride, offset)
    return constants


def _fits(view: DecodeView | PagedDecodeView, cache_dtype: torch.dtype) -> bool:
    """Whether the package can read this cache: it indexes its inputs by the strides and dtype it was built for."""
    caches = view.pools if isinstance(view, PagedDecodeView) else (view.keys, view.values)
    return all(cache.dtype == cache_dtype and cache.is_contiguous() for cache in caches)


def _sharing_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model``'s module tree that shares every tensor with it (no weight is duplicated)."""
    memo = {}
    for module in model.modules():
        for value in vars(module).values():
            for item in (
                value.values()
                if isinstance(value, dict)
                else vars(value).values()
                if hasattr(value, "__dataclass_fields__")
                else [value]
            ):
                if isinstance(item, torch.Tensor):
                    memo[id(item)] = item
    return copy.deepcopy(model, memo)


def export_graph(graph: AnglesGivenStepGraph | PagedStepGraph, name: str = "any"):
    """``torch.export`` of the step (graph ``name``) on example inputs, with every size dynamic."""
    from torch.export import Dim

    if name == "paged":
        return _export_paged(graph)
    config = graph.model.config
    cache_dtype, device = _cache_dtype(graph.model), next(graph.model.parameters()).device
    batch, pool, capacity, seen = 3, 5, 64, 9  # example sizes only, all different (export must not equate them)
    shape = (config.n_layers, pool, config.n_kv_heads, capacity, config.head_dim)
    rows = torch.arange(batch, device=device)
    view = DecodeView(
        rows,
        torch.full_like(rows, seen - 1),
        torch.ones(batch, seen, dtype=torch.bool, device=device),
        torch.zeros(shape, dtype=cache_dtype, device=device),
        torch.zeros(shape, dtype=cache_dtype, device=device),
    )
    rope = graph.rope_inputs(view.columns.clone())  # (B, bases, 2, hd): the angles of positions == columns
    inputs = _graph_inputs(torch.zeros(batch, dtype=torch.long, device=device), rope, view)
    rows_dim = {0: Dim("rows", min=1, max=4096)}
    cache = {1: Dim("pool", min=1, max=4096), 3: Dim("cache_len", min=1, max=config.max_seq_len)}
    dynamic = (
        rows_dim,
        rows_dim,
        rows_dim,
        rows_dim,
        {0: rows_dim[0], 1: Dim("key_len", min=1, max=config.max_seq_len)},
        cache,
        cache,
    )
    with torch.no_grad():
        return torch.export.export(graph, inputs, dynamic_shapes=dynamic, strict=False)


def _export_paged(graph: PagedStepGraph):
    """``torch.export`` of the paged step on example inputs: rows, table width, pool blocks and block size dynamic."""
    from torch.export import Dim

    config = graph.model.config
    cache_dtype, device = _cache_dtype(graph.model), next(graph.model.parameters()).device
    batch, width, blocks, size = 3, 4, 7, 5  # example sizes only, all different (export must not equate them)
    groups = config.layer_groups()
    pools = [
        torch.zeros(len(layers), config.n_kv_heads, blocks, size, config.head_dim, dtype=cache_dtype, device=device)
        for _, layers in groups
        for _ in range(2)  # (L_g, n_kv, NB, bs, hd): keys, values
    ]
    held = torch.tensor([1, 9, 17], device=device)  # (B,): each within its row's width * size columns
    tables = torch.arange(len(groups) * batch * width, device=device).remainder(blocks).view(len(groups), batch, width)
    rope = graph.rope_inputs(held - 1)  # (B, bases, 2, hd)
    inputs = (torch.zeros(batch, dtype=torch.long, device=device), rope, held, tables, *pools)
    rows = Dim("rows", min=1, max=4096)
    pool = {2: Dim("blocks", min=1, max=1 << 20), 3: Dim("block_size", min=2, max=4096)}
    dynamic = ({0: rows}, {0: rows}, {0: rows}, {1: rows, 2: Dim("width", min=1, max=config.max_seq_len)})
    with torch.no_grad():
        return torch.export.export(graph, inputs, dynamic_shapes=(*dynamic, (pool,) * len(pools)), strict=False)


def _cache_dtype(model: torch.nn.Module) -> torch.dtype:
    """The dtype of the model's activations and KV cache (the engine's rule: its first parameter's)."""
    return next(model.parameters()).dtype


def _graph_inputs(ids: torch.Tensor, rope: torch.Tensor, view: DecodeView | PagedDecodeView) -> tuple:
    """The graph's arguments (``AnglesGivenStepGraph.forward``'s, or ``PagedStepGraph.forward``'s for a paged view):
    contiguous, as the package indexes them by the example's strides."""
    if isinstance(view, PagedDecodeView):
        small = (ids, rope, view.held, view.tables)
        return (*(t.contiguous() for t in small), *view.pools)
    small = (ids, rope, view.slots, view.columns, view.key_ok)
    return (*(t.contiguous() for t in small), view.keys, view.values)


def artifact_key(model, mode: str, graph: str, options: dict | None = None) -> tuple[str, dict]:
    """The on-disk key of a compiled graph, and the manifest that says in words what it was built from (``options``:
    inductor's, ``INDUCTOR_OPTIONS`` unless given)."""
    digest = hashlib.sha256()
    tensors = dict(model.named_parameters(remove_duplicate=False))
    tensors.update(model.named_buffers(remove_duplicate=False))
    for name in sorted(tensors):  # the weights themselves: another checkpoint can never match
        tensor = tensors[name].detach()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.contiguous().view(-1).view(torch.uint8).cpu().numpy().tobytes())
    code = hashlib.sha256()
    for source in _SOURCES:
        code.update((Path(__file__).parent / source).read_bytes())
    config: ModelConfig = model.config
    manifest = {
        "format": PACKAGE_FORMAT,
        "model": config.name,
        "mode": mode,
        "graph": graph,
        "family": config.family,
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "kernel": getattr(getattr(model, "quantization", None), "kernel", None),  # what multiplies by the groups
        "cpp_march": _cpp_march(),  # TORCHINDUCTOR_CPP_MARCH (None: -march=native)
        "device": str(next(model.parameters()).device),
        "options": dict(INDUCTOR_OPTIONS if options is None else options),
        "code_sha256": code.hexdigest(),
        "weights_sha256": digest.hexdigest(),
        "config": repr(config),
    }
    key = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:32]
    return key, manifest


def _cpp_march() -> str | None:
    """The ``-march`` inductor compiles for (None: the machine's own): its config's value where inductor is imported
    (the process may have set it), else the environment variable that config reads when it is imported."""
    inductor_config = sys.modules.get("torch._inductor.config")
    if inductor_config is not None:
        return inductor_config.cpp.march
    return os.environ.get("TORCHINDUCTOR_CPP_MARCH")
