"""The engines we measure ourselves against, behind one small interface: transformers and llama.cpp.

Owns loading each reference on the same weights as our engine (transformers from the
converted Hugging Face folder, llama.cpp from the very same GGUF file), and three things
asked of each: greedy decode tok/s, prefill tok/s, and the logits at every position of a
prompt (for the accuracy table). llama.cpp (``llama-cpp-python``) is optional: it compiles
for minutes, so it is a benchmark extra (``requirements-bench.txt``), never a test
dependency; without it the benchmark says so and leaves its rows out.

Also transformers reading a GGUF file itself (``transformers_gguf_model``): its own
dequantization, tensor names and fix-ups, independent of ``inference.model.gguf`` (the
Gemma parity tests' reference). That takes ~25 s for Gemma 3 270M (mostly parsing the
262,144-entry tokenizer metadata), so the loaded model is saved once as safetensors into a
checksummed folder of the user cache (``cache_root()/reference``), keyed by the GGUF's
sha256 and transformers' version; later runs load it in a few seconds.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import torch

from ..model.digests import known_sha256
from ..model.gguf import cache_root, checksummed_folder

REFERENCE_FORMAT = 1


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


class TransformersReference:
    """transformers' own model on the weights our engine loaded (its converted HF folder)."""

    name = "transformers"

    def __init__(self, folder: Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> None:
        from transformers import AutoModelForCausalLM

        self.device = torch.device(device)
        self.model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).to(self.device).eval()

    def decode_tok_s(self, ids: list[int], new_tokens: int) -> float:
        """generate(): (time for N tokens - time for 1 token) / (N - 1), so the prefill is left out."""
        inputs = torch.tensor([ids], device=self.device)

        def run(n: int) -> float:
            return timed(
                lambda: self.model.generate(inputs, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
            )

        return (new_tokens - 1) / max(run(new_tokens) - run(1), 1e-9)

    def prefill_tok_s(self, ids: list[int]) -> float:
        inputs = torch.tensor([ids], device=self.device)
        with torch.inference_mode():
            return len(ids) / timed(lambda: self.model(inputs, use_cache=True))

    def logits(self, ids: list[int]) -> torch.Tensor:
        """(T, V) float32 logits at every position."""
        with torch.inference_mode():
            return self.model(torch.tensor([ids], device=self.device)).logits[0].float().cpu()


def llama_cpp_problem() -> str | None:
    """Why llama.cpp cannot be measured here (None when ``llama-cpp-python`` is importable)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return (
            "llama-cpp-python is not installed (an optional benchmark extra, ~5 minutes to compile): "
            "`.venv/bin/python -m pip install -r requirements-bench.txt`"
        )
    return None


class LlamaCppReference:
    """llama.cpp on the very same GGUF file, with as many threads as our engine."""

    name = "llama.cpp"

    def __init__(self, gguf_path: Path, threads: int, context: int = 2048) -> None:
        from llama_cpp import Llama

        self.llm = Llama(
            model_path=str(gguf_path),
            n_threads=threads,
            n_threads_batch=threads,
            n_ctx=context,
            logits_all=True,
            verbose=False,
        )
        import llama_cpp

        self.version = llama_cpp.__version__

    def _greedy_after(self, position: int) -> int:
        return int(self.llm.scores[position].argmax())

    def decode_tok_s(self, ids: list[int], new_tokens: int) -> float:
        """Greedy decode, one ``eval`` per token after the prompt: tok/s of the steps after the first."""
        self.llm.reset()
        self.llm.eval(ids)
        token = self._greedy_after(self.llm.n_tokens - 1)
        started = time.perf_counter()
        for _ in range(new_tokens - 1):
            self.llm.eval([token])
            token = self._greedy_after(self.llm.n_tokens - 1)
        return (new_tokens - 1) / (time.perf_counter() - started)

    def prefill_tok_s(self, ids: list[int]) -> float:
        """The prompt in one ``eval`` asking for the last position's logits only, as our engine's prefill does
        (``last_only``): with ``logits_all`` llama.cpp would also run the output matrix at every other position
        and copy each row out. The flag is set back after, for ``logits``."""
        self.llm.reset()
        self.llm._logits_all = False  # llama-cpp-python's own switch, read by each eval (pinned: 0.3.36)
        try:
            return len(ids) / timed(lambda: self.llm.eval(ids))
        finally:
            self.llm._logits_all = True

    def logits(self, ids: list[int]) -> torch.Tensor:
        self.llm.reset()
        self.llm.eval(ids)
        return torch.from_numpy(self.llm.scores[: len(ids)].copy()).float()  # (T, V)


def transformers_gguf_folder(gguf_path: Path) -> Path:
    """A folder holding what transformers itself reads out of ``gguf_path`` (built once, checked every time)."""
    import transformers

    gguf_path = Path(gguf_path)
    source_hash = known_sha256(gguf_path)
    folder = cache_root() / "reference" / f"{gguf_path.stem}-{source_hash[:16]}-transformers-{transformers.__version__}"
    return checksummed_folder(
        folder, gguf_path, source_hash, lambda out: _save_gguf_reference(gguf_path, out), cache_format=REFERENCE_FORMAT
    )


def transformers_gguf_model(gguf_path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu"):
    """transformers' model as transformers itself reads ``gguf_path`` (from the cached folder)."""
    return TransformersReference(transformers_gguf_folder(gguf_path), dtype, device).model


def _save_gguf_reference(gguf_path: Path, out: Path) -> None:
    import functools
    from unittest import mock

    import gguf
    from transformers import AutoModelForCausalLM

    # transformers opens the file twice (its config, then its weights), and each ``gguf.GGUFReader`` parses every
    # field again (Gemma 3: ~10 s a parse, its vocabulary's). The second opening gets the first one's reader: the
    # same package's parse of the same file, so the reference is still transformers' own reading of it.
    with mock.patch.object(gguf, "GGUFReader", functools.cache(gguf.GGUFReader)):
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
        )
    # The weights are already dequantized to float32; only the GGUF marker keeps them from being saved.
    del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(str(out))
