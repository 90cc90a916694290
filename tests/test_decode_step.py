"""The compiled one-graph decode step computes what the eager step computes, falls back and says why, and keeps
its packages on disk under a key no other model or mode can match.

Every family the graph covers (tiny random Llama with GQA, tiny random Gemma 3 with an 8-key window on
layer 0, multi-query attention and its own local RoPE base) in every mode (float32, bfloat16, and the
file's blocks: Q4_1 projections, a Q8_0 embedding and output matrix) is compiled once for this module,
into a temporary cache folder, by AOTInductor with freezing. The shipped options (max-autotune too) compile the
modes the app runs, float32 and the file's blocks, on Llama, and the file's blocks on Gemma 3: there autotune picks
inductor's own kernels (its float32 and 4-bit micro-GEMMs on AVX-512). Gemma's float32 and both bfloat16 steps
are compiled without autotune: it changes which kernel multiplies, not the graph these tests check (window,
padding, cache writes), and it took 49 of a tiny step's 78 s of compile (measured on 2 cores, quiet). Each is
compared with the same weights run eagerly: alone past the window, in a left-padded static batch and by
continuous batching (one to four rows over a slot pool). Bounds: float32 by ``inference/model/tolerances.py``; the
bfloat16 and quantized paths round their matmul inputs or outputs to bfloat16, so the same model with
bfloat16's unit roundoff; tokens must agree wherever the eager run's top two logits are further apart.
"""

from __future__ import annotations

import copy
import dataclasses
import os

import pytest
import torch

from inference import run_continuous, run_static
from inference.model import decode_step as decode_step_module
from inference.model.decode_step import INDUCTOR_OPTIONS, DecodeStep, artifact_key, compiler_problem
from inference.model.quant import quantize_model
from inference.serving.paged import PagedBatcher
from tests.test_batching import PROMPTS, greedy, solo, tiny_engine
from tests.test_quant import _gguf_weights
from tests.tolerances import max_abs_diff, model_tolerance, top2_margin

pytestmark = pytest.mark.skipif(compiler_problem() is not None, reason=f"no compiler: {compiler_problem()}")

MODES = ["float32", "bfloat16", "gguf"]
FAMILY = "llama"  # Gemma 3's compiled steps: tests/test_decode_step_gemma.py (the same checks, on the other worker)


def eager_engine(family: str, mode: str):
    engine = tiny_engine(family)
    if mode == "bfloat16":
        engine.model.to(torch.bfloat16)
        engine.model.reset_rotary("cpu")
        engine.dtype = torch.bfloat16
    if mode == "gguf":
        engine.model.quantization = quantize_model(engine.model, "gguf", _gguf_weights(engine.model))
    return engine


@pytest.fixture(scope="module")
def step_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("compiled-steps")


_COMPILED: dict[tuple, tuple] = {}  # one compile per family, mode and graphs for the whole module


DENSE = ("any",)  # the graph the dense caches read: every test compiles it, and the paged one only where it runs it
SHIPPED = {("llama", "float32"), ("llama", "gguf"), ("gemma3", "gguf")}  # compiled with the app's own options
WITHOUT_AUTOTUNE = {**INDUCTOR_OPTIONS, "max_autotune": False}


def compiled_pair(family: str, mode: str, step_cache, graphs: tuple[str, ...] = DENSE):
    """(eager, compiled) engines on the same weights; the compiled one's step (``graphs``) compiled before it is
    returned. The app's own options on the dense graph of a shipped mode; every other compile without autotune."""
    if (family, mode, graphs) not in _COMPILED:
        eager = eager_engine(family, mode)
        compiled = copy.deepcopy(eager)
        options = None if (family, mode) in SHIPPED and graphs == DENSE else WITHOUT_AUTOTUNE
        compiled.model.decode_step = DecodeStep(
            compiled.model, mode, step_cache, background=False, options=options, graphs=graphs
        )
        assert compiled.step_status.state == "ready", compiled.step_status
        _COMPILED[family, mode, graphs] = eager, compiled
    return _COMPILED[family, mode, graphs]


@pytest.fixture(scope="module", params=[(FAMILY, m) for m in MODES], ids=lambda p: f"{p[0]}-{p[1]}")
def engines(request, step_cache):
    return compiled_pair(*request.param, step_cache)


def _tolerance(engine, logits: list[torch.Tensor]) -> float:
    dtype = torch.float32 if engine.dtype == torch.float32 and engine.model.quantization is None else torch.bfloat16
    return model_tolerance(engine.config, torch.stack(logits), context=256, dtype=dtype)


def assert_same_run(engine, tokens, logits, expected_tokens, expected_logits) -> None:
    """Logits within the bound at every step; tokens equal wherever the eager choice was not a near-tie."""
    tolerance = _tolerance(engine, expected_logits)
    for step, (got, expected) in enumerate(zip(logits, expected_logits)):
        if tokens[step] != expected_tokens[step]:
            assert top2_margin(expected) < 2 * tolerance, f"step {step}: a clear choice differs"
            return  # a near-tie went the other way: the runs may part from here
        assert max_abs_diff(got, expected) <= tolerance, f"step {step}"
    assert tokens == expected_tokens


def counting(engine):
    """Count the steps the compiled graph serves (the eager fallback would pass silently otherwise)."""
    step = engine.model.decode_step
    calls = []
    original = step.__call__

    class Counted:
        applies = staticmethod(step.applies)

        def __call__(self, *args):
            logits = original(*args)
            calls.append(logits is not None)
            return logits

        def __getattr__(self, name):
            return getattr(step, name)

    engine.model.decode_step = Counted()
    return calls, lambda: setattr(engine.model, "decode_step", step)


def test_compiled_solo_equals_eager_past_the_window(engines):
    eager, compiled = engines
    params = greedy(20, stop_on_eos=False)  # 4 + 20 positions: past Gemma's 8-key window
    calls, restore = counting(compiled)
    try:
        tokens, logits = solo(compiled, PROMPTS[1], params)
    finally:
        restore()
    assert calls and all(calls)  # every decode step went through the compiled graph
    assert_same_run(eager, tokens, logits, *solo(eager, PROMPTS[1], params))


def test_speculation_through_the_compiled_step_equals_eager_plain(engines):
    """Speculative decoding on the compiled engine: its plain steps (nothing drafted) go through the compiled
    graph, its verifying forwards (several positions) run eagerly; greedy tokens are the eager plain run's."""
    from inference import Speculation

    eager, compiled = engines
    prompt, params = PROMPTS[2], greedy(24, stop_on_eos=False)  # 37 + 24 positions: past Gemma's window
    calls, restore = counting(compiled)
    try:
        runs = [
            compiled.complete(prompt, params, speculate=s) for s in (Speculation(), Speculation("self", 3, layers=1))
        ]
    finally:
        restore()
    plain_steps = sum(step.phase == "plain" for run in runs for step in run.steps)
    assert all(calls) and len(calls) == plain_steps  # each plain step, and only those, ran the compiled graph
    expected_tokens, expected_logits = solo(eager, prompt, params)
    tolerance = _tolerance(eager, expected_logits)
    for run in runs:
        assert run.drafted > 0
        for step, (got, expected) in enumerate(zip(run.token_ids, expected_tokens)):
            if got != expected:
                assert top2_margin(expected_logits[step]) < 2 * tolerance, f"step {step}: a clear choice differs"
                break
        else:
            assert run.token_ids == expected_tokens


def test_the_window_moves_the_logits_by_more_than_the_bound():
    """The positive control of the Gemma rows: the same tiny Gemma with its 8-key window lifted agrees within the
    bound up to the window's end and parts from it by far more than the bound after, so a compiled step that
    ignored or misplaced the window could not pass ``test_compiled_solo_equals_eager_past_the_window``."""
    windowed = eager_engine("gemma3", "float32")
    windowless = copy.deepcopy(windowed)
    windowless.model.config = dataclasses.replace(windowed.config, sliding_window=10_000)
    tokens, _ = solo(windowed, PROMPTS[1], greedy(20, stop_on_eos=False))
    ids = PROMPTS[1] + tokens  # 24 positions, 8 keys per local query from position 8 on
    expected, got = windowed.forward_logits(ids), windowless.forward_logits(ids)  # (T, V) each
    window = windowed.config.sliding_window
    tolerance = _tolerance(windowed, list(expected))
    assert max_abs_diff(got[:window], expected[:window]) <= tolerance  # the window has not cut a key yet
    assert max_abs_diff(got[window:], expected[window:]) > 100 * tolerance


@pytest.mark.parametrize("runner", [run_static, run_continuous], ids=["static-padded", "continuous"])
def test_compiled_batches_equal_solo(engines, runner):
    """Static: one left-padded batch of four (prompts of 1, 4, 37 and 90 tokens); continuous: a pool of two
    slots, so rows join, leave and run one or two at a time."""
    eager, compiled = engines
    params = [greedy(n, stop_on_eos=False) for n in (6, 4, 9, 3)]
    calls, restore = counting(compiled)
    try:
        kwargs = {"n_slots": 2} if runner is run_continuous else {}
        run = runner(compiled, PROMPTS, params, keep_logits=True, **kwargs)
    finally:
        restore()
    assert calls and all(calls)
    for prompt, p, result in zip(PROMPTS, params, run.results):
        assert_same_run(eager, result.token_ids, result.logits, *solo(eager, prompt, p))


@pytest.fixture(scope="module")
def paged_engines(step_cache):
    return compiled_pair(FAMILY, "float32", step_cache, graphs=("paged",))  # what a paged cache reads


def test_compiled_paged_steps_equal_solo(paged_engines):
    """The paged graph reads each row's blocks in place through its table: rows that join and leave, a 4-position
    block (so Gemma's local layers give back the blocks that slid out of their window, and the tables hold released
    entries), and two answers forked from one prompt (copy-on-write on their shared last block). Every decode step
    runs compiled and gives the eager solo run's logits."""
    eager, compiled = paged_engines
    params = [greedy(n, stop_on_eos=False) for n in (6, 20, 9, 3)]
    forked = [dataclasses.replace(greedy(8, stop_on_eos=False), temperature=0.9, seed=seed) for seed in (1, 2)]
    calls, restore = counting(compiled)
    try:
        batcher = PagedBatcher(compiled, num_blocks=96, block_size=4, keep_logits=True)
        sequences = [batcher.add(prompt, p) for prompt, p in zip(PROMPTS, params)]
        sequences += batcher.add_parallel(PROMPTS[2], forked)
        released = False
        while batcher.has_work:
            batcher.step()
            tables = [table.blocks for group in batcher.cache.groups for table in group.manager.tables.values()]
            released |= any(block is None for blocks in tables for block in blocks)
    finally:
        restore()
    assert len(calls) >= 19 and all(calls)  # every decode step (20 tokens: 19 after the prefill's) ran compiled
    windowed = eager.config.sliding_window is not None
    assert released == windowed  # a local layer's table held a released block while the graph read it
    for sequence, prompt, p in zip(sequences, [*PROMPTS, PROMPTS[2], PROMPTS[2]], [*params, *forked]):
        assert_same_run(eager, sequence.output_ids, batcher.logits[sequence], *solo(eager, prompt, p))


def test_the_package_is_found_on_disk_and_keyed_by_model_and_mode(step_cache):
    llama = eager_engine("llama", "float32")
    key, manifest = artifact_key(llama.model, "float32", "any")
    assert artifact_key(copy.deepcopy(llama.model), "float32", "any")[0] == key  # the same weights: the same key
    assert artifact_key(llama.model, "bfloat16", "any")[0] != key  # another mode
    assert artifact_key(llama.model, "float32", "static")[0] != key  # another graph
    assert artifact_key(llama.model, "float32", "any", WITHOUT_AUTOTUNE)[0] != key  # other compiler options
    other = copy.deepcopy(llama.model)
    with torch.no_grad():
        other.layers[1].mlp.down.weight[0, 0] += 1e-3  # one weight differs: another model of the same shapes
    assert artifact_key(other, "float32", "any")[0] != key
    assert manifest["torch"] == torch.__version__ and manifest["mode"] == "float32" and manifest["graph"] == "any"
    # the float32 Llama compiled for this module left its package: a second step on these weights loads it
    compiled_pair("llama", "float32", step_cache)
    assert (step_cache / key / "step.pt2").exists() and (step_cache / key / "unpacked").is_dir()
    reloaded = DecodeStep(llama.model, "float32", step_cache, background=False, graphs=DENSE)
    assert reloaded.status.state == "ready" and "loaded from disk" in reloaded.status.detail


@pytest.mark.parametrize("mode", ["float32", "gguf"])
def test_the_loaded_step_reads_the_models_own_weights(step_cache, mode):
    """The package keeps its weights beside its library, and the runner is handed the model's own tensors: every
    weight it reads by the model's name is the model's memory, not a second copy (the .so held one before)."""
    _, compiled = compiled_pair("llama", mode, step_cache)
    model = compiled.model
    tensors = dict(model.named_parameters(remove_duplicate=False))
    tensors.update((name, t) for name, t in model.named_buffers() if not name.startswith("rope"))  # RoPE: computed
    constants = model.decode_step._constants["any"]
    named = {name.removeprefix("model."): t for name, t in constants.items() if name.startswith("model.")}
    assert set(named) == set(tensors)
    assert all(
        named[name].untyped_storage().data_ptr() == t.untyped_storage().data_ptr() for name, t in tensors.items()
    )


@pytest.mark.parametrize("mode", ["float32", "gguf"])
def test_the_compiled_kernels_evaluate_no_cosine(step_cache, mode):
    """The RoPE cos and sin are inputs of the compiled step: computed once a step by the caller. Computed inside the
    graph, inductor inlined them into every loop reading the rotated queries and keys, so each was evaluated again
    for every cached key of every layer (a quarter of a 16-row step on an AVX2 machine)."""
    import re
    import zipfile

    _, compiled = compiled_pair(FAMILY, mode, step_cache)
    key, _ = artifact_key(compiled.model, mode, "any")
    with zipfile.ZipFile(step_cache / key / "step.pt2") as archive:
        sources = [archive.read(n).decode() for n in archive.namelist() if n.endswith(".cpp")]
    assert sources and any("cpp_fused" in text for text in sources)  # the kernels' own source is in the package
    found = [m.group(0) for text in sources for m in re.finditer(r"(?:\.|std::|Sleef_)(?:cos|sin)\w*\(", text)]
    assert not found, found[:5]


LOAD_IN_A_FRESH_PROCESS = """
import os, sys, torch
from pathlib import Path
from inference.bench.memory import COMPILER_MODULES
from inference.model.decode_step import DecodeStep
from tests.test_decode_step import eager_engine
engine = eager_engine("llama", "{mode}")
engine.model.decode_step = DecodeStep(engine.model, "{mode}", Path(sys.argv[1]), background=False, graphs=("any",))
cache = engine.new_cache(8)
engine.prefill([5, 6, 7], cache)
torch.save(engine.decode_step(8, cache), sys.argv[2])
print(engine.step_status.detail, sorted(m for m in COMPILER_MODULES if m in sys.modules), flush=True)
os._exit(0)  # as a killed process ends: no destructor runs
"""


@pytest.mark.parametrize("mode", ["float32", "gguf"])
def test_a_step_loaded_from_disk_leaves_the_compiler_unimported(step_cache, tmp_path, mode):
    """A process that finds its step on disk loads it through torch's C++ loader: torch._inductor's Python side
    (with torch._dynamo and sympy, ~70 MiB of modules) is never imported, and the step gives the same logits as the
    in-process one (the same library, handed the same weights). It loads the package's unpacked folder: a process
    that ends without its destructors (killed) leaves nothing in the temporary folder (given the zip, the loader
    extracted 5.5 MB a graph there, removed only by its destructor)."""
    import subprocess
    import sys
    from pathlib import Path

    _, compiled = compiled_pair(FAMILY, mode, step_cache)  # its package is on disk now
    cache = compiled.new_cache(8)
    compiled.prefill([5, 6, 7], cache)
    expected = compiled.decode_step(8, cache)
    out = tmp_path / "logits.pt"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", LOAD_IN_A_FRESH_PROCESS.format(mode=mode), str(step_cache), str(out)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "TMPDIR": str(temporary)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "any: loaded from disk []", done.stdout
    assert torch.equal(torch.load(out), expected)
    assert list(temporary.iterdir()) == []


def test_a_package_is_unpacked_once_beside_it_and_a_half_unpacked_folder_is_replaced(tmp_path):
    import zipfile

    package = tmp_path / "step.pt2"
    with zipfile.ZipFile(package, "w") as archive:
        archive.writestr("step/data/aotinductor/model/a.txt", "a")
    stale = tmp_path / "unpacked.tmp999999"  # a process killed while unpacking
    (stale / "step").mkdir(parents=True)
    folder = decode_step_module.unpack(package)
    assert folder == decode_step_module.unpacked(package) == tmp_path / "unpacked"
    assert (folder / "step/data/aotinductor/model/a.txt").read_text() == "a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step.pt2", "unpacked"]
    (folder / "step/data/aotinductor/model/a.txt").write_text("kept")
    assert decode_step_module.unpack(package) == folder  # once: an unpacked folder is used as it is
    assert (folder / "step/data/aotinductor/model/a.txt").read_text() == "kept"


def test_background_compile_serves_eagerly_until_ready(step_cache, monkeypatch):
    engine = eager_engine("llama", "float32")
    eager_logits = engine.decode_step(5, engine.new_cache(4))
    started = []
    monkeypatch.setattr(DecodeStep, "_build", lambda self, graphs: started.append(graphs))  # never finishes
    engine.model.decode_step = DecodeStep(engine.model, "float32", step_cache, background=True)
    assert engine.step_status.state == "compiling"
    assert engine.step_status.line == "compiling the fast step… (eager until then)"
    assert torch.equal(engine.decode_step(5, engine.new_cache(4)), eager_logits)  # eager, unchanged


def test_a_compile_failure_falls_back_with_a_message(step_cache, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("C++ compile failed: cc1plus killed")

    monkeypatch.setattr(decode_step_module, "export_graph", broken)
    engine = eager_engine("llama", "float32")
    expected = engine.decode_step(5, engine.new_cache(4))
    engine.model.decode_step = DecodeStep(engine.model, "float32", step_cache / "empty", background=False)
    status = engine.step_status
    assert status.state == "eager" and "cc1plus killed" in status.detail and "eager step runs" in status.detail
    assert status.line.startswith("eager step (compiling the decode step failed")
    assert torch.equal(engine.decode_step(5, engine.new_cache(4)), expected)


def test_no_compiler_is_said_at_load(tmp_path, tokenizer_folder, monkeypatch):
    from inference import load_engine
    from inference.model import loader
    from tests.tiny_models import save_folder, tiny_gpt2, tiny_llama

    monkeypatch.setattr(loader, "compiler_problem", lambda: "no C++ compiler (g++) on this machine")
    engine = load_engine(model=save_folder(tiny_llama(), tmp_path / "llama", tokenizer_folder), compile=True)
    assert engine.model.decode_step is None and engine.step_status.state == "eager"
    assert "no C++ compiler" in engine.step_status.line
    monkeypatch.setattr(loader, "compiler_problem", lambda: None)
    gpt2 = load_engine(model=save_folder(tiny_gpt2(), tmp_path / "gpt2", tokenizer_folder), compile=True)
    assert gpt2.model.decode_step is None and "the gpt2 family" in gpt2.step_status.detail


def test_the_sidebar_says_what_runs(step_cache, monkeypatch):
    from inference.model.decode_step import StepStatus
    from inference.serving.client import EngineClient
    from ui.common.sidebar import model_facts

    engine = eager_engine("gemma3", "float32")
    client = EngineClient(engine)  # the sidebar reads the engine through its client
    assert "Decode step" not in model_facts(client)  # compile=False: nothing to say
    monkeypatch.setattr(DecodeStep, "_build", lambda self, graphs: None)
    engine.model.decode_step = DecodeStep(engine.model, "float32", step_cache, background=True)
    assert model_facts(client)["Decode step"] == "compiling the fast step… (eager until then)"
    engine.model.decode_step._status = StepStatus("ready", "any: loaded from disk", ("any",), 1.2)
    assert model_facts(client)["Decode step"] == "compiled"


def test_a_step_the_package_cannot_run_falls_back_for_good(step_cache):
    """A failing compiled call (say, a size beyond the package's ranges) gives the eager step's logits and says so."""
    eager, _ = compiled_pair("llama", "float32", step_cache)  # its package is on disk
    engine = copy.deepcopy(eager)
    engine.model.decode_step = DecodeStep(engine.model, "float32", step_cache, background=False, graphs=DENSE)

    class Refusing:
        def boxed_run(self, inputs):
            raise RuntimeError("Error: shape for rows is 5000, outside [1, 4096]")

    engine.model.decode_step._runners["any"] = Refusing()
    cache, expected_cache = engine.new_cache(8), eager.new_cache(8)
    assert torch.equal(engine.prefill([5, 6], cache), eager.prefill([5, 6], expected_cache))
    assert torch.equal(engine.decode_step(7, cache), eager.decode_step(7, expected_cache))
    assert engine.step_status.state == "eager" and "outside [1, 4096]" in engine.step_status.detail
    assert len(cache) == 3 and torch.equal(cache.keys[:, :, :, :3], expected_cache.keys[:, :, :, :3])


@pytest.mark.parametrize("isa, template", [("VecAVX512", True), ("VecAVX2", False)])
def test_the_benchmark_says_whether_inductor_has_a_4_bit_micro_gemm_for_this_cpu(monkeypatch, isa, template):
    """The 4-bit products of the compiled step can only take inductor's own micro-GEMM on AVX-512 (its only
    4-bit template besides AMX); the benchmark says which this CPU has, so a row is read with it."""
    from torch._inductor import cpu_vec_isa

    from inference.bench.__main__ import cpu_kernels

    monkeypatch.setattr(cpu_vec_isa, "pick_vec_isa", lambda: type(isa, (), {})())
    kernels = cpu_kernels()
    assert kernels["inductor"] == isa.removeprefix("Vec")
    assert kernels["int4_template"] is template
    assert kernels["aten"] == torch.backends.cpu.get_cpu_capability()
