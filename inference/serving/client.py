"""The one way the explorer reads an engine: a client with named methods over plain values.

Owns ``EngineClient``: everything a page reads of a model, each a named method that takes plain
values (token ids, text, a ``SamplingParams``, an ``Interventions`` spec without tensors, numpy
arrays) and returns numpy arrays and plain dataclasses (``inference.inspection``), plus ``submit``
to the model's generation server and the objects of one walk through generation (a ``Stepper``,
read back as arrays). A caller never needs torch, and never touches the model: the client holds
the engine, its tokenizer (``tokenizer``, the public wrapper) and its facts (``info``).

``PLAIN_CALLS`` names the methods whose arguments and results are plain values only: those are the
ones a client in another process may be asked to run by name (``ProcessServer.call``; the child
runs them on an ``EngineClient`` of its own). The rest (a walk's ``Stepper``, progress callbacks,
batch runs timed for the page, other clients) run where the caller is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..generation.engine import Completion, Engine, StepRecord
from ..generation.sampling import SamplingParams
from ..generation.speculative import Speculation, SpeculativeRun
from ..generation.stepper import Stepper
from ..inspection.attention import AttentionArrays, WindowView, attention_arrays, window_view
from ..inspection.cache import CacheBytes, CacheTiming, CacheView, cache_bytes, cache_view, measure_cache_timing
from ..inspection.embeddings import EmbeddingReader
from ..inspection.experiments import (
    AttributionTerms,
    PatchLogits,
    attribution,
    clean_streams,
    greedy_text,
    head_importance_layer,
    head_means,
    next_token_probs,
    patch_column,
    patch_logits,
    with_means,
)
from ..inspection.info import model_info
from ..inspection.residual import LastPosition, Lens, TracedPrompt, last_position, logit_lens, traced_prompt
from ..inspection.weights import (
    FileSummary,
    ModeComparison,
    StoredBlock,
    decode_speed,
    file_summary,
    file_tensors,
    stored_block,
)
from ..inspection.weights import compare_modes as compare_engines
from ..model.decode_step import StepStatus
from ..model.interventions import Interventions
from ..model.kv_cache import causal_padding_mask
from ..model.loader import gguf_source
from .continuous import run_continuous
from .padding import left_pad
from .requests import BatchRun
from .static import run_static

if TYPE_CHECKING:
    from .server import EngineServer, RequestHandle

# Methods that take and return plain values only (ids, text, settings, specs, arrays, dataclasses of those).
PLAIN_CALLS = frozenset(
    {
        "encode_prompt",
        "last_logits",
        "attention",
        "window",
        "trace",
        "lens",
        "embedding_rows",
        "nearest",
        "word_cosines",
        "projection_vectors",
        "rope_angles",
        "rope_cos",
        "rope_wavelengths",
        "rope_tables",
        "learned_positions",
        "head_means",
        "next_token_probs",
        "greedy_text",
        "head_importance_layer",
        "patch_logits",
        "clean_streams",
        "patch_column",
        "attribution",
        "generate",
        "speculate",
        "decode_speed",
    }
)


class EngineClient:
    """One model's engine, read through named methods (see the module docstring).

    ``server`` gives the model's generation server when ``submit`` first needs it (a callable, so a
    page that never generates never starts one); ``source`` is what the engine was loaded from
    (``load_engine``'s ``model``: the GGUF file, if any, is found from it when a page asks).
    """

    def __init__(
        self, engine: Engine, server: Callable[[], EngineServer] | None = None, source: str | Path | None = None
    ) -> None:
        self._engine = engine
        self._server = server
        self._source = source
        self.info = model_info(engine)
        self.tokenizer = engine.tokenizer
        self._embeddings = EmbeddingReader(engine)
        self._file_tensors: dict | None = None
        self._lock = threading.Lock()

    @property
    def config(self):
        return self.info.config

    def step_status(self) -> StepStatus | None:
        """What the decode step runs now (compiling, compiled, or eager and why); ``None`` when not compiled."""
        return self._engine.step_status

    # -- prompts and the next token ---------------------------------------------------
    def encode_prompt(self, prompt: str | list[int], chat: bool = False) -> list[int]:
        """The prompt's token ids (with the chat template when ``chat``); ``PromptError`` when it cannot run."""
        return self._engine.encode_prompt(prompt, chat=chat)

    def last_logits(self, ids: list[int]) -> np.ndarray:
        """Logits (V,) of the last position of ``ids``: one forward without a cache (T rows could be GBs)."""
        return self._engine.recompute_last(ids).numpy().copy()

    # -- attention and the residual stream ---------------------------------------------
    def attention(self, ids: list[int]) -> AttentionArrays:
        """Every layer's and head's attention of one traced forward of ``ids``."""
        return attention_arrays(self._engine, ids)

    def window(self, ids: list[int], pooled_cells: int) -> WindowView:
        """The sliding window's effect, measured on one traced forward of ``ids`` (longer than the window)."""
        return window_view(self._engine, ids, pooled_cells)

    def trace(self, ids: list[int], max_positions: int = 16) -> TracedPrompt:
        """One traced forward of ``ids``: the block walk, and the logit lens over its last ``max_positions``."""
        return traced_prompt(self._engine, ids, max_positions)

    def last_position(self, ids: list[int]) -> LastPosition:
        """One traced forward of ``ids`` read at its last position (the Overview picture)."""
        return last_position(self._engine, ids)

    def lens(
        self, ids: list[int], keep_from: int, spec: Interventions | None = None, means: np.ndarray | None = None
    ) -> Lens:
        """The logit lens of one traced forward of ``ids`` under ``spec``, from position ``keep_from`` on."""
        return logit_lens(self._engine, ids, keep_from, with_means(spec, means))

    # -- the embedding matrix and positions --------------------------------------------
    def embedding_rows(self, ids: list[int]) -> np.ndarray:
        return self._embeddings.rows(ids)

    def nearest(self, token_id: int, k: int = 12) -> list[tuple[int, float]]:
        return self._embeddings.nearest(token_id, k)

    def word_cosines(self, word: str, others: tuple[str, ...]) -> list[float]:
        return self._embeddings.word_cosines(word, others)

    def projection_vectors(self, ids: list[int], words: tuple[str, ...]):
        return self._embeddings.projection_vectors(ids, words)

    def rope_angles(self, n_positions: int, local: bool = False) -> np.ndarray:
        return self._embeddings.rope_angles(n_positions, local)

    def rope_cos(self, n_positions: int, local: bool = False) -> np.ndarray:
        return self._embeddings.rope_cos(n_positions, local)

    def rope_wavelengths(self, local: bool = False) -> np.ndarray:
        return self._embeddings.rope_wavelengths(local)

    def rope_tables(self, layer: int, n_positions: int) -> tuple[np.ndarray, np.ndarray]:
        return self._embeddings.rope_tables_of_layer(layer, n_positions)

    def learned_positions(self, n_positions: int) -> np.ndarray:
        return self._embeddings.learned_positions(n_positions)

    # -- experiments -------------------------------------------------------------------
    def head_means(self, ids: list[int]) -> np.ndarray:
        return head_means(self._engine, ids)

    def next_token_probs(
        self, ids: list[int], spec: Interventions | None = None, means: np.ndarray | None = None
    ) -> np.ndarray:
        return next_token_probs(self._engine, ids, spec, means)

    def greedy_text(
        self, ids: list[int], n_tokens: int, spec: Interventions | None = None, means: np.ndarray | None = None
    ) -> str:
        return greedy_text(self._engine, ids, n_tokens, spec, means)

    def head_importance_layer(
        self, ids: list[int], target: int, mode: str, factor: float, layer: int, means: np.ndarray | None = None
    ) -> np.ndarray:
        return head_importance_layer(self._engine, ids, target, mode, factor, layer, means)

    def patch_logits(self, clean_ids: list[int], corrupt_ids: list[int]) -> PatchLogits:
        return patch_logits(self._engine, clean_ids, corrupt_ids)

    def clean_streams(self, clean_ids: list[int]) -> np.ndarray:
        return clean_streams(self._engine, clean_ids)

    def patch_column(
        self, corrupt_ids: list[int], streams: np.ndarray, position: int, setup: PatchLogits
    ) -> np.ndarray:
        return patch_column(self._engine, corrupt_ids, streams, position, setup)

    def attribution(
        self, ids: list[int], target: int, spec: Interventions | None = None, means: np.ndarray | None = None
    ) -> AttributionTerms:
        return attribution(self._engine, ids, target, spec, means)

    # -- generation --------------------------------------------------------------------
    def generate(self, prompt: str | list[int], params: SamplingParams, chat: bool = False) -> list[StepRecord]:
        """Every step of one request run alone (``Engine.generate``), each with its time."""
        return list(self._engine.generate(prompt, params, chat=chat))

    def complete(self, prompt: str | list[int], params: SamplingParams) -> Completion:
        return self._engine.complete(prompt, params)

    def speculate(
        self, prompt: str | list[int], params: SamplingParams, speculation: Speculation, chat: bool = False
    ) -> SpeculativeRun:
        """Every step of one request decoded speculatively (``Engine.speculate``): drafts, p and q, the draws."""
        return self._engine.complete(prompt, params, speculate=speculation, chat=chat)

    def stepper(self, prompt_ids: list[int], params: SamplingParams, max_steps: int) -> Stepper:
        """A new walk through generation for one session (its own KV cache)."""
        return Stepper(self._engine, prompt_ids, params, max_steps=max_steps)

    def owns(self, stepper: Stepper) -> bool:
        """Whether ``stepper`` walks this client's engine (a session's walk from before a model switch does not)."""
        return stepper.engine is self._engine

    def cache_view(self, stepper: Stepper, layer: int, max_positions: int = 96) -> CacheView:
        return cache_view(stepper, layer, max_positions)

    def cache_bytes(self, stepper: Stepper) -> CacheBytes:
        return cache_bytes(stepper)

    def measure_cache_timing(
        self, prompt_ids: list[int], n_tokens: int, progress: Callable[[float, str], None] | None = None
    ) -> CacheTiming:
        return measure_cache_timing(self._engine, prompt_ids, n_tokens, progress)

    def submit(
        self,
        prompt: str | list[int],
        params: SamplingParams | None = None,
        chat: bool = False,
        interventions: Interventions | None = None,
    ) -> RequestHandle:
        """Queue a request on the model's shared generation server (batched with every session's)."""
        if self._server is None:
            raise RuntimeError("this client has no generation server")
        return self._server().submit(prompt, params, chat=chat, interventions=interventions)

    # -- batching ----------------------------------------------------------------------
    def padded_batch(self, rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``rows`` left-padded exactly as static batching pads them: ids, real-token mask and positions (B, T)
        and each row's attention mask (B, T, T)."""
        ids, mask, positions = left_pad(rows)  # each (B, T)
        masks = causal_padding_mask(mask, 0)[:, 0]  # (B, T, T)
        return ids.numpy(), mask.numpy(), positions.numpy(), masks.numpy()

    def run_static(self, prompts: list[str | list[int]], params: list[SamplingParams]) -> BatchRun:
        return run_static(self._engine, prompts, params)

    def run_continuous(
        self, prompts: list[str | list[int]], params: list[SamplingParams], n_slots: int, share_prefixes: bool = False
    ) -> BatchRun:
        return run_continuous(self._engine, prompts, params, n_slots=n_slots, share_prefixes=share_prefixes)

    # -- the weights -------------------------------------------------------------------
    def gguf_file(self) -> Path | None:
        """The GGUF file the model was read from, or None (a float checkpoint)."""
        return gguf_source(self._source)

    def file_tensors(self) -> dict:
        """The model's GGUF tensors by name, read once ({} without a GGUF file)."""
        with self._lock:
            if self._file_tensors is None:
                path = self.gguf_file()
                self._file_tensors = {} if path is None else file_tensors(path)
            return self._file_tensors

    def stored_block(self, tensor: str, row: int = 0, block: int = 0) -> StoredBlock | None:
        return stored_block(self.file_tensors(), tensor, row, block)

    def file_summary(self) -> FileSummary | None:
        tensors = self.file_tensors()
        return file_summary(tensors) if tensors else None

    def decode_speed(self, prompt_ids: list[int], n_tokens: int = 24) -> float:
        return decode_speed(self._engine, prompt_ids, n_tokens)


def compare_modes(clients: Mapping[str, EngineClient], ids: list[int], top_n: int = 8) -> ModeComparison:
    """``ids`` through one model in several weights modes (mode -> its client; "none", float32, is the reference)."""
    return compare_engines({mode: client._engine for mode, client in clients.items()}, ids, top_n)
