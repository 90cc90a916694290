"""An engine holds one copy of each weight: no float copy it never reads, no view of the checkpoint file kept open.

The tiny-model tests check the mechanisms exactly: a dense load closes the mapped checkpoint (a
tied matrix stays one tensor), and a load that takes its projections from a GGUF's blocks never
reads their float weights yet builds the very same modules, bit for bit, as quantizing a model that
read them all. The real-model test bounds what ``load_engine(quant="gguf")`` adds to a fresh
process by what its weights take (``inference.bench.memory``).
"""

from __future__ import annotations

import ast
import ctypes
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import quantize

from inference import load_engine
from inference.model.loader import _unread_tensors, build_model, read_folder
from inference.model.quant import GGUFWeight, QuantEmbedding, block_sourced, quantize_model
from tests.tiny_models import save_folder, tiny_llama

MIB = 2**20


def _mapped_paths() -> set[str]:
    """Every file this process has mapped (the sixth field of /proc/self/maps)."""
    lines = Path("/proc/self/maps").read_text().splitlines()
    return {parts[5] for parts in (line.split(maxsplit=5) for line in lines) if len(parts) > 5}


@pytest.fixture(scope="module")
def tied_folder(tmp_path_factory, tokenizer_folder):
    return save_folder(tiny_llama(tie_word_embeddings=True), tmp_path_factory.mktemp("tied"), tokenizer_folder)


def test_a_dense_load_keeps_no_view_of_the_checkpoint(tied_folder):
    checkpoint = str(tied_folder / "model.safetensors")
    engine = load_engine(model=tied_folder, device="cpu", dtype="float32")
    assert checkpoint not in _mapped_paths()  # the norms were copied out: the mapping closed
    assert engine.model.embed.weight is engine.model.lm_head.weight  # still one tied matrix
    assert torch.isfinite(engine.forward_logits([1, 5, 9])).all()


def _file_blocks(model: torch.nn.Module) -> dict[str, list[GGUFWeight]]:
    """What a GGUF of this tiny model would hold, as the loader lists it: Q4_1 projections, one Q8_0 tied table."""
    weights = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            weights[name] = [GGUFWeight("Q4_1", quantize(module.weight.detach().numpy(), GGMLQuantizationType.Q4_1))]
    table = GGUFWeight("Q8_0", quantize(model.embed.weight.detach().numpy(), GGMLQuantizationType.Q8_0))
    weights["embed"] = weights["lm_head"] = [table]  # tied: the same tensor of the file, twice
    return weights


@pytest.mark.parametrize("kernel", ["int4pack", "int8rows"])
def test_blocks_are_loaded_without_reading_their_float_weights(tied_folder, kernel):
    cpu = torch.device("cpu")
    config, everything = read_folder(tied_folder)
    full = build_model(config, everything, cpu, torch.float32)
    blocks = _file_blocks(full)
    full.quantization = quantize_model(full, "gguf", blocks, kernel=kernel)  # the tied table shared with lm_head

    from_blocks = block_sourced(blocks)
    assert from_blocks == set(blocks)  # every projection and the table: none is stored as floats
    skipped = _unread_tensors(config, from_blocks)
    _, tensors = read_folder(tied_folder, skip=skipped)
    assert skipped and all(tensors[name].is_meta for name in skipped)
    assert all(not t.is_meta for name, t in tensors.items() if name not in skipped)  # the norms are read
    lean = build_model(config, tensors, cpu, torch.float32, from_blocks)
    lean.quantization = quantize_model(lean, "gguf", blocks, kernel=kernel)

    assert isinstance(lean.embed, QuantEmbedding) and lean.embed.scale.dtype == torch.float16  # the file's own d
    assert lean.lm_head.groups.codes is lean.embed.codes  # the tied table's codes are held once
    full_state, lean_state = full.state_dict(), lean.state_dict()
    assert full_state.keys() == lean_state.keys()
    assert all(torch.equal(full_state[name], lean_state[name]) for name in full_state)
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    assert torch.equal(full(ids), lean(ids))


def test_a_table_of_scales_fp16_cannot_hold_stays_float32():
    codes = torch.ones(4, 32, dtype=torch.int8)
    from inference.model.quant_formats import Int8Groups

    exact = QuantEmbedding(Int8Groups(codes, torch.full((4, 1), 0.5)), torch.device("cpu"))
    inexact = QuantEmbedding(Int8Groups(codes, torch.full((4, 1), 1 / 3)), torch.device("cpu"))
    assert exact.scale.dtype == torch.float16 and inexact.scale.dtype == torch.float32
    assert torch.equal(inexact(torch.tensor([2]))[0], torch.full((32,), 1 / 3))


# What a fresh process gains at load beside the weights it keeps, measured on SmolLM2 (2 cores, torch 2.13): the
# tokenizer with the transformers modules it needs, the RoPE tables (8 MiB), the kernel self-check's library pages
# (11 MiB), the model's Python objects and the allocator's slack: 37 MiB in all. It was 119 MiB while the load imported
# torch._dynamo and sympy on the way (a meta kernel of ``cat``, AutoTokenizer's model registry). The bound leaves 43 MiB
# for other machines and library builds.
LOAD_OVERHEAD = 80 * MIB


@pytest.mark.real_model
def test_the_gguf_engine_adds_its_weights_and_a_stated_overhead():
    """A fresh process that loads ``quant="gguf"`` grows by the bytes of the tensors it keeps (the file's 4-bit
    blocks, the 8-bit table and its split for the output matrix) plus ``LOAD_OVERHEAD``: no float32 copy, no
    mapped checkpoint. Before: +972 MiB (513 of them the conversion cache's float32 file, mapped and resident)."""
    from inference.bench.memory import measure

    result = measure("gguf@int4pack")  # the file's own blocks on any CPU (the AVX2 default holds 8-bit rows)
    baseline, loaded = result["points"]["baseline"], result["points"]["loaded"]
    assert result["held_bytes"] < 130 * MIB  # the weights as kept: 4-bit groups and the Q8_0 table
    assert not [path for path in result["mapped_files"] if path.endswith((".safetensors", ".gguf"))]
    growth = loaded["rss"] - baseline["rss"]
    assert growth <= result["held_bytes"] + LOAD_OVERHEAD, (growth / MIB, result["held_bytes"] / MIB)
    assert result["compiler_modules"] == []  # loading and decoding never import torch's compiler in Python


def test_the_memory_readings_run_by_path_on_the_standard_library_alone():
    """``resident.py`` is what llama.cpp's memory child runs by its path: its module-level imports are the standard
    library's, and loaded that way (``-P``, nothing from its folder on the path) it reads this process's memory
    with neither torch nor the engine imported, so their pages never count against llama.cpp."""
    from inference.bench import resident

    script = Path(resident.__file__)
    tree = ast.parse(script.read_text())
    imported = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and not node.level}
    assert not [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.level]  # no relative import
    assert imported <= sys.stdlib_module_names | {"__future__"}, imported
    probe = (
        f"import runpy, sys; found = runpy.run_path({str(script)!r}, run_name='probe'); now = found['Resident'].now(); "
        "print(now.rss > now.anonymous > 0, 'torch' in sys.modules, 'inference' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-P", "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False", "False"]


@pytest.mark.real_model
def test_llama_cpp_memory_is_read_in_a_process_of_its_own():
    """llama.cpp on the default GGUF file, measured as ours are: loaded with a 2,048-token context (it maps the file
    itself), 16 tokens decoded, in a child without torch. Runs where ``llama-cpp-python`` is installed."""
    pytest.importorskip("llama_cpp")
    from inference.bench.memory import describe, measure_llama_cpp
    from inference.model.gguf import default_gguf_path

    gguf = default_gguf_path()
    result = measure_llama_cpp(gguf, threads=1)
    points = result["points"]
    assert not result["torch_imported"] and result["tokens"] == 16 and result["context"] == 2048
    assert str(gguf.resolve()) in {str(Path(path).resolve()) for path in result["mapped_files"]}
    assert points["baseline"]["rss"] < points["loaded"]["rss"] <= points["decoded"]["rss"]
    assert describe(result)[0].startswith(f"{result['mode']}: RSS MiB (anonymous + file) baseline ")


def test_a_failed_llama_cpp_child_says_so(tmp_path):
    """A child that cannot measure (no llama-cpp-python, or no such file) is one clear error, not a JSON traceback."""
    from inference.bench.memory import measure_llama_cpp

    with pytest.raises(RuntimeError, match="measuring llama.cpp failed"):
        measure_llama_cpp(tmp_path / "missing.gguf", threads=1)


HEAPS = """
import ctypes, re, sys, tempfile, threading
from inference.model.memory import limit_heap_arenas
limited = limit_heap_arenas(2) if sys.argv[1] == "limit" else None
barrier = threading.Barrier(6)
def session():  # a script thread: its own allocations, alive beside the others
    kept = [bytearray(1000) for _ in range(100)]
    barrier.wait()
threads = [threading.Thread(target=session) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile("r", suffix=".xml") as report:
    stream = ctypes.c_void_p(libc.fopen(report.name.encode(), b"w"))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(limited, len(re.findall('<heap nr=', report.read())))
"""


@pytest.mark.skipif(sys.platform != "linux" or not hasattr(ctypes.CDLL(None), "malloc_info"), reason="glibc only")
def test_a_server_s_threads_share_the_capped_heaps():
    """Six threads alive at once: glibc gives each a heap of its own (up to 8 per core); capped at 2, they share two."""

    def heaps(mode: str) -> tuple[str, int]:
        out = subprocess.run([sys.executable, "-c", HEAPS, mode], capture_output=True, text=True, check=True)
        limited, count = out.stdout.split()
        return limited, int(count)

    assert heaps("limit") == ("True", 2)
    assert heaps("free")[1] > 2  # the control: without the cap the threads do get heaps of their own
