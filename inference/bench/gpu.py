"""The GPU check: what a lent GPU machine runs as it is (no network, no pip), results under ``--out``.

    python3 -m inference.bench.gpu [--device cuda] [--out DIR] [--budget 420] [--tiny] [--compile-backend inductor]

``scripts/gpu-check.sh`` runs it with the machine's own ``python3`` (torch with CUDA, numpy, safetensors,
tokenizers, transformers; no gguf, streamlit or model packages). Speed depends on shapes, not values,
so the models are built here with the real models' shapes and seeded random weights:
``smollm2`` (SmolLM2-135M: 30 layers, 9 query / 3 K/V heads, d_model 576) and ``gemma`` (Gemma 3 270M:
18 layers, multi-query, head_dim 256, a 512-key window on five layers of six, a 262,144-entry vocabulary).
The real SmolLM2 joins only where its GGUF and the ``gguf`` reader are found (a carried wheel).

Checks (each a row of ``checks.json``; the exit status is 1 when one fails):

- the quantized kernels' self-check on the device;
- device against CPU in float32 (TF32 off), logits within the derived bound of ``inference/model/tolerances.py``;
- on the device, the one-graph step (``decode_graph.StepGraph``) against the eager engine: greedy
  tokens equal and logits within the bound, in bfloat16 and on the 4-bit path, for both shapes, run
  through a CUDA graph (explicit capture) and compiled with ``mode="reduce-overhead"``.

Speed rows (``speed.json``): decode tok/s at batch 1 and aggregate at batch 64, bf16 and 4-bit, eager,
captured and compiled, against the H200 goals (SmolLM2 bf16: 1,000 tok/s at batch 1, 20,000 at 64).
Rows run in order of importance and stop at ``--budget`` seconds, saying which were left out.
On the CPU (``--device cpu --tiny``, the test suite's run) the same logic runs on tiny shapes: the
"captured" step replays the same static buffers without a CUDA graph, and ``--compile-backend
eager`` traces the graph whole without generating code.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from ..generation.engine import Engine
from ..model.config import ModelConfig
from ..model.decode_graph import StepGraph
from ..model.quant import kernel_problem, quantize_model
from ..model.transformer import Transformer
from ..number_text import real_arg

SMOLLM2 = ModelConfig(name="SmolLM2-135M-shaped")  # the config's defaults are SmolLM2-135M's shapes
GEMMA = ModelConfig(
    family="gemma3",
    n_layers=18,
    n_heads=4,
    n_kv_heads=1,
    d_model=640,
    d_ff=2048,
    vocab_size=262144,
    max_seq_len=32768,
    head_dim=256,
    rope_theta=1_000_000.0,
    norm_eps=1e-6,
    tie_embeddings=True,
    sliding_window=512,
    local_layers=tuple(i for i in range(18) if i % 6 != 5),
    rope_local_theta=10_000.0,
    query_pre_attn_scalar=256.0,
    embed_scale=math.sqrt(640),
    name="Gemma-3-270M-shaped",
)
TINY = {  # the CPU run's stand-ins: the same families and features, tiny
    "smollm2": replace(
        SMOLLM2,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        d_model=64,
        d_ff=128,
        vocab_size=512,
        max_seq_len=256,
        head_dim=16,
        name="tiny-llama",
    ),
    "gemma": replace(
        GEMMA,
        n_layers=3,
        n_heads=4,
        d_model=64,
        d_ff=128,
        vocab_size=512,
        max_seq_len=256,
        head_dim=32,
        sliding_window=8,
        local_layers=(0, 2),
        embed_scale=8.0,
        query_pre_attn_scalar=24.0,
        name="tiny-gemma",
    ),
}
GOALS = {("smollm2", "bf16", 1): 1_000.0, ("smollm2", "bf16", 64): 20_000.0}  # tok/s on an H200


class IdTokenizer:
    """Token ids are all these models see: just enough tokenizer for the engine."""

    eos_ids: frozenset[int] = frozenset()

    def decode(self, ids: list[int]) -> str:
        return "".join(f" {i}" for i in ids)


def random_model(config: ModelConfig, seed: int = 0) -> Transformer:
    """``config``'s shapes with seeded random weights (std 0.02, norms near 1), float32 on the CPU."""
    generator = torch.Generator().manual_seed(seed)
    model = Transformer(config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:  # RMSNorm scales (Gemma stores 1 + w: near 0)
                base = 0.0 if config.family == "gemma3" else 1.0
                parameter.copy_(base + 0.1 * torch.randn(parameter.shape, generator=generator))
            else:
                parameter.copy_(0.02 * torch.randn(parameter.shape, generator=generator))
    model.reset_rotary("cpu")
    return model.eval()


def engine_on(model: Transformer, device: torch.device, mode: str) -> Engine:
    """A copy of ``model`` on ``device`` in ``mode``: "fp32", "bf16", or "int4" (4-bit groups, bf16 around them)."""
    import copy

    moved = copy.deepcopy(model).to(device, torch.bfloat16 if mode == "bf16" else torch.float32)
    moved.reset_rotary(device)
    if mode == "int4":
        moved.quantization = quantize_model(moved, "int4")
    return Engine(moved.eval(), IdTokenizer())


# -- the static step: fixed buffers a CUDA graph (or a compiled graph) replays -----------------------------
class StaticStep:
    """One decode step of ``batch`` rows over a full-capacity cache, from fixed input buffers.

    The cache is allocated once at ``capacity``; each step writes the rows' tokens into the same
    buffers, and the key mask (True up to each row's length) stands in for the growing key length, so
    every step has the same shapes and addresses: what a CUDA graph needs. ``kind`` is "eager" (the
    graph module called as it is), "captured" (one CUDA graph, replayed; on the CPU the same buffers
    without one) or "compiled" (``torch.compile(mode="reduce-overhead")``, CUDA graphs included on CUDA).
    """

    def __init__(self, engine: Engine, batch: int, capacity: int, kind: str, backend: str = "inductor") -> None:
        config, device = engine.config, engine.device
        self.engine, self.batch, self.capacity, self.kind = engine, batch, capacity, kind
        shape = (config.n_layers, batch, config.n_kv_heads, capacity, config.head_dim)
        self.keys = torch.zeros(shape, dtype=engine.dtype, device=device)  # (L, B, n_kv, C, hd)
        self.values = torch.zeros(shape, dtype=engine.dtype, device=device)
        rows = torch.arange(batch, device=device)
        self.ids = torch.zeros(batch, dtype=torch.long, device=device)
        self.positions = torch.zeros(batch, dtype=torch.long, device=device)
        self.columns = torch.zeros(batch, dtype=torch.long, device=device)  # == positions: no padding here
        self.key_ok = torch.zeros(batch, capacity, dtype=torch.bool, device=device)
        self.rows = rows
        self.inputs = (self.ids, self.positions, rows, self.columns, self.key_ok, self.keys, self.values)
        self.graph_module = StepGraph(engine.model).eval()
        self.length = 0
        self._fn = self.graph_module
        self._graph = None
        self.compile_seconds = 0.0
        if kind == "compiled":
            torch._dynamo.reset()  # each static step is its own graph (its own shapes); the last one is done with
            torch._dynamo.mark_static_address(self.keys)  # the cache is written in place, at a fixed address
            torch._dynamo.mark_static_address(self.values)
            mode = "reduce-overhead" if device.type == "cuda" and backend == "inductor" else None
            self._fn = torch.compile(self.graph_module, fullgraph=True, dynamic=False, mode=mode, backend=backend)

    def load(self, cache, length: int) -> None:
        """Start from the first ``length`` positions of an eager ``KVCache`` (one row, copied to every row)."""
        self.keys[:, :, :, :length] = cache.keys[:, :1, :, :length]
        self.values[:, :, :, :length] = cache.values[:, :1, :, :length]
        self.key_ok.zero_()
        self.key_ok[:, :length] = True
        self.length = length

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (B,); logits (B, V) float32 (a view of the graph's output buffer when captured)."""
        self.ids.copy_(tokens)
        self.positions.fill_(self.length)
        self.columns.fill_(self.length)
        self.key_ok[:, self.length] = True
        with torch.inference_mode(False), torch.no_grad():
            if self.kind == "captured" and self.engine.device.type == "cuda":
                if self._graph is None:
                    self._capture()
                self._graph.replay()
                logits = self._output
            else:
                started = time.perf_counter()
                logits = self._write(*self._fn(*self.inputs))
                if self.kind == "compiled" and not self.compile_seconds:
                    self.compile_seconds = time.perf_counter() - started
        self.length += 1
        return logits

    def _write(self, logits: torch.Tensor, new_keys: torch.Tensor, new_values: torch.Tensor) -> torch.Tensor:
        """Put the step's new K/V (B, L, n_kv, hd) into the cache at the rows' column, as ``DecodeStep`` does."""
        self.keys[:, self.rows, :, self.columns] = new_keys
        self.values[:, self.rows, :, self.columns] = new_values
        return logits

    def _capture(self) -> None:
        """Warm up on a side stream, then record one step into a CUDA graph (the inputs stay where they are)."""
        snapshot = (self.keys.clone(), self.values.clone())  # warm-up writes a column; put it back after
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._write(*self.graph_module(*self.inputs))
        torch.cuda.current_stream().wait_stream(stream)
        self.keys.copy_(snapshot[0])
        self.values.copy_(snapshot[1])
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self._output = self._write(*self.graph_module(*self.inputs))
        self.keys.copy_(snapshot[0])  # the capture ran the step once too
        self.values.copy_(snapshot[1])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# -- checks ---------------------------------------------------------------------------------------------
@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    numbers: dict = field(default_factory=dict)


def _bound(config: ModelConfig, reference: torch.Tensor, dtype: torch.dtype, context: int) -> float:
    from ..model.tolerances import model_tolerance  # the derived bound the suite uses too

    return model_tolerance(config, reference, context=context, dtype=dtype)


def check_device_matches_cpu(model: Transformer, device: torch.device, prompt: list[int]) -> Check:
    """float32 on the device (TF32 off) against float32 on the CPU: the same network, other summation orders."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cpu = Engine(model, IdTokenizer()).forward_logits(prompt)
    on_device = engine_on(model, device, "fp32").forward_logits(prompt)
    diff = float((cpu - on_device).abs().max())
    bound = _bound(model.config, cpu, torch.float32, len(prompt))
    return Check(
        f"{model.config.name}: {device} float32 equals CPU float32",
        diff <= bound,
        f"max |Δlogit| {diff:.2e}, bound {bound:.2e}",
        {"max_diff": diff, "bound": bound},
    )


def check_step_equals_eager(engine: Engine, kind: str, prompt: list[int], new_tokens: int, backend: str) -> Check:
    """The static one-graph step (``kind``) against the eager engine from the same prefilled cache: greedy
    tokens equal, logits within the bound (a near-tie within it may go either way, then the runs part)."""
    from ..model.tolerances import top2_margin

    cache = engine.new_cache(len(prompt) + new_tokens)
    logits = engine.prefill(prompt, cache)
    static = StaticStep(engine, 1, len(prompt) + new_tokens, kind, backend)
    static.load(cache, len(prompt))
    token = int(logits.argmax())
    worst, bound_used, parted = 0.0, 0.0, None
    for step in range(new_tokens - 1):
        expected = engine.decode_step(token, cache)  # (V,) eager
        got = static.step(torch.tensor([token], device=engine.device))[0].float().cpu()
        bound = 2 * _bound(
            engine.config,
            expected,
            engine.dtype if engine.model.quantization is None else torch.bfloat16,
            len(prompt) + step + 1,
        )
        worst, bound_used = max(worst, float((got - expected).abs().max())), bound
        if int(got.argmax()) != int(expected.argmax()):
            if top2_margin(expected) >= bound:
                return Check(
                    f"{engine.config.name} {_mode(engine)}: {kind} step equals eager",
                    False,
                    f"step {step}: a clear choice differs",
                    {"max_diff": worst},
                )
            parted = step
            break
        if worst > bound:
            break
        token = int(expected.argmax())
    ok = worst <= bound_used
    note = f"; parted at a near-tie at step {parted}" if parted is not None else ""
    return Check(
        f"{engine.config.name} {_mode(engine)}: {kind} step equals eager",
        ok,
        f"max |Δlogit| {worst:.2e}, bound {bound_used:.2e}{note}",
        {"max_diff": worst, "bound": bound_used, "compile_seconds": static.compile_seconds},
    )


def _mode(engine: Engine) -> str:
    return "int4" if engine.model.quantization is not None else str(engine.dtype).removeprefix("torch.")


# -- speed ------------------------------------------------------------------------------------------------
def decode_speed(engine: Engine, kind: str, batch: int, steps: int, backend: str, prompt_len: int = 16) -> dict:
    """Aggregate decode tok/s of ``batch`` rows over ``steps`` steps (after two warm-up steps)."""
    capacity = prompt_len + steps + 2
    started = time.perf_counter()
    if kind == "eager":
        cache = engine.new_cache(capacity, batch_size=batch)
        ids = torch.randint(0, engine.config.vocab_size, (batch, prompt_len), device=engine.device)
        engine.prefill_batch(ids, kv_cache=cache)
        token = ids[:, -1:]  # (B, 1)

        def one() -> None:  # the engine's own step, its logits brought to the host as every runner needs them
            engine.decode_batch(token, cache)
    else:
        static = StaticStep(engine, batch, capacity, kind, backend)
        static.key_ok[:, :prompt_len] = True
        static.length = prompt_len
        token = torch.zeros(batch, dtype=torch.long, device=engine.device)

        def one() -> None:
            static.step(token)

    one(), one()  # warm-up: compiling or capturing happens here
    _sync(engine.device)
    warm = time.perf_counter() - started
    tick = time.perf_counter()
    for _ in range(steps):
        one()
    _sync(engine.device)
    seconds = time.perf_counter() - tick
    return {"tok_s": batch * steps / seconds, "step_ms": 1e3 * seconds / steps, "setup_seconds": warm}


def run(device: torch.device, out: Path, budget: float, tiny: bool, backend: str) -> int:
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    env = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "device": str(device),
        "name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        "tiny": tiny,
    }
    (out / "env.json").write_text(json.dumps(env, indent=1))
    print(json.dumps(env), flush=True)
    configs = TINY if tiny else {"smollm2": SMOLLM2, "gemma": GEMMA}
    models = {name: random_model(config) for name, config in configs.items()}
    checks: list[Check] = []
    problem = kernel_problem(device)
    checks.append(Check(f"quantized kernels on {device}", problem is None, problem or "self-check passed"))
    prompt = [int(i) for i in torch.randint(0, 500, (24,), generator=torch.Generator().manual_seed(1))]
    steps = 4 if tiny else 128
    big_batch = 4 if tiny else 64
    plan = []  # (what, thunk) in order of importance; the budget cuts the tail
    for name, model in models.items():
        plan.append(
            (f"{name}: device vs CPU", lambda m=model: checks.append(check_device_matches_cpu(m, device, prompt)))
        )
    engines = {(name, mode): None for name in models for mode in ("bf16", "int4")}

    def engine(name: str, mode: str) -> Engine:
        if engines[(name, mode)] is None:
            engines[(name, mode)] = engine_on(models[name], device, mode)
        return engines[(name, mode)]

    speed: list[dict] = []

    def speed_row(name: str, mode: str, kind: str, batch: int) -> None:
        row = {
            "model": name,
            "mode": mode,
            "kind": kind,
            "batch": batch,
            **decode_speed(engine(name, mode), kind, batch, steps, backend),
        }
        goal = GOALS.get((name, mode, batch)) if not tiny and device.type == "cuda" else None
        if goal is not None and kind != "eager":
            row.update(goal_tok_s=goal, goal_met=row["tok_s"] >= goal)
        speed.append(row)
        print(json.dumps(row), flush=True)

    for kind in ("captured", "compiled"):
        for name, mode in (("smollm2", "bf16"), ("smollm2", "int4"), ("gemma", "bf16"), ("gemma", "int4")):
            if kind == "compiled" and name == "gemma" and mode == "int4":
                continue  # the captured row covers it; a fourth compile would not fit the budget
            plan.append(
                (
                    f"{name} {mode}: {kind} == eager",
                    lambda n=name, m=mode, k=kind: checks.append(
                        check_step_equals_eager(engine(n, m), k, prompt, steps // 4 + 4, backend)
                    ),
                )
            )
    for name, mode in (("smollm2", "bf16"), ("smollm2", "int4"), ("gemma", "bf16"), ("gemma", "int4")):
        for batch in (1, big_batch):
            for kind in ("eager", "captured", "compiled"):
                if kind == "compiled" and name == "gemma" and mode == "int4":
                    continue
                plan.append(
                    (
                        f"speed {name} {mode} {kind} batch {batch}",
                        lambda n=name, m=mode, k=kind, b=batch: speed_row(n, m, k, b),
                    )
                )
    left_out = []
    for what, thunk in plan:
        if time.perf_counter() - started > budget:
            left_out.append(what)
            continue
        try:
            thunk()
        except Exception as exc:  # one failing row must not lose the others' results
            checks.append(Check(what, False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
        _write(out, checks, speed, left_out, time.perf_counter() - started)
    _write(out, checks, speed, left_out, time.perf_counter() - started)
    for check in checks:
        print(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}")
    if left_out:
        print(f"left out by the {budget:.0f} s budget: {', '.join(left_out)}")
    return 0 if all(c.ok for c in checks) else 1


def _write(out: Path, checks: list[Check], speed: list[dict], left_out: list[str], seconds: float) -> None:
    (out / "checks.json").write_text(json.dumps([asdict(c) for c in checks], indent=1))
    (out / "speed.json").write_text(json.dumps({"rows": speed, "left_out": left_out, "seconds": seconds}, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m inference.bench.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=Path("bench-results") / "gpu")
    parser.add_argument("--budget", type=real_arg, default=420.0, help="seconds before the remaining rows are left out")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (the CPU test of this script's logic)")
    parser.add_argument("--compile-backend", default="inductor", help="inductor, or eager (trace only: the CPU test)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device here: use --device cpu --tiny to check the logic")
    return run(device, args.out, args.budget, args.tiny, args.compile_backend)


if __name__ == "__main__":
    raise SystemExit(main())
