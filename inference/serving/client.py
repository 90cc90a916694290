"""The explorer's backend on an engine in this process: ``EngineClient``, which implements ``inference.api.Backend``.

Owns ``EngineClient``: every method of the ``Backend`` Protocol (``inference/api.py`` says what each
facet is for and the rules a backend keeps), run on one ``Engine`` held here: plain values in (token
ids, text, a ``SamplingParams``, an ``Interventions`` spec without tensors), numpy arrays and the
records of ``inference.inspection`` out, plus ``submit`` to the model's generation server and the
objects of one walk through generation (a ``Stepper``). A caller never needs torch and never
touches the engine.

``PLAIN_CALLS`` names the methods whose arguments and results are plain values only: those are the
ones a client in another process may be asked to run by name (``ProcessServer.call``; the child
runs them on an ``EngineClient`` of its own). The rest (a walk's ``Stepper``, progress callbacks,
batch runs timed for the page, other backends) run where the caller is.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..generation.engine import Completion, Engine
from ..generation.sampling import SamplingParams
from ..generation.speculative import Speculation, SpeculativeRun
from ..generation.stepper import Stepper
from ..inspection.attention import AttentionArrays, WindowView, attention_arrays, window_view
from ..inspection.blocks import StoredLayout, stored_layout
from ..inspection.cache import CacheTiming, measure_cache_timing
from ..inspection.embeddings import EmbeddingReader, PositionTables
from ..inspection.experiments import (
    AttributionTerms,
    Patching,
    attribution,
    clean_streams,
    head_importance_layer,
    head_means,
    next_token_probs,
    patch_column,
    patch_logits,
    with_means,
)
from ..inspection.info import ModelInfo, model_info
from ..inspection.residual import LastPosition, TracedPrompt, last_position, traced_prompt
from ..inspection.weights import FileSummary, ModeComparison, file_summary, file_tensors
from ..inspection.weights import compare_modes as compare_engines
from ..model.interventions import Interventions
from ..model.loader import gguf_source
from .continuous import run_continuous
from .paging_records import PagedKV
from .paging_trace import run_paged_traced
from .requests import BatchRun
from .static import run_static

if TYPE_CHECKING:
    from .server import EngineServer, RequestHandle

# Methods that take and return plain values only (ids, text, settings, specs, arrays, dataclasses of those).
PLAIN_CALLS = frozenset(
    {
        "encode_prompt",
        "last_logits",
        "next_token_probs",
        "attention",
        "window",
        "trace",
        "last_position",
        "embedding_rows",
        "nearest",
        "word_cosines",
        "projection_vectors",
        "positions",
        "complete",
        "head_importance",
        "patch",
        "attribution",
    }
)
HELD_PROMPTS = 4  # prompts whose head means (and clean streams, for patching) a client keeps


class EngineClient:
    """One model's engine, read through the ``Backend`` methods (see ``inference/api.py``).

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
        self._info = model_info(engine)
        self.tokenizer = engine.tokenizer
        self._embeddings = EmbeddingReader(engine)
        self._file_tensors: dict | None = None
        self._lock = threading.Lock()
        self._held: OrderedDict[tuple, object] = OrderedDict()  # (kind, ids) -> head means, a patch setup, streams

    @property
    def info(self) -> ModelInfo:
        """The model's facts, with what its decode step runs now (it changes once a compile ends)."""
        return dataclasses.replace(self._info, step_status=self._engine.step_status)

    # -- text ----------------------------------------------------------------------------
    def encode_prompt(self, prompt: str | list[int], chat: bool = False) -> list[int]:
        return self._engine.encode_prompt(prompt, chat=chat)

    # -- a forward and what it records -----------------------------------------------------
    def last_logits(self, ids: list[int]) -> np.ndarray:
        """One forward without a cache (T rows could be GBs): the last position's logits only."""
        return self._engine.recompute_last(ids).numpy().copy()

    def next_token_probs(self, ids: list[int], spec: Interventions | None = None) -> np.ndarray:
        return next_token_probs(self._engine, ids, self._with_means(spec, ids))

    def attention(self, ids: list[int]) -> AttentionArrays:
        return attention_arrays(self._engine, ids)

    def window(self, ids: list[int], pooled_cells: int) -> WindowView:
        return window_view(self._engine, ids, pooled_cells)

    def trace(self, ids: list[int], keep_from: int | None = None, spec: Interventions | None = None) -> TracedPrompt:
        return traced_prompt(self._engine, ids, keep_from, self._with_means(spec, ids))

    def last_position(self, ids: list[int]) -> LastPosition:
        return last_position(self._engine, ids)

    # -- the embedding matrix and positions --------------------------------------------
    def embedding_rows(self, ids: list[int]) -> np.ndarray:
        return self._embeddings.rows(ids)

    def nearest(self, token_id: int, k: int = 12) -> list[tuple[int, float]]:
        return self._embeddings.nearest(token_id, k)

    def word_cosines(self, word: str, others: tuple[str, ...]) -> list[float]:
        return self._embeddings.word_cosines(word, others)

    def projection_vectors(
        self, ids: list[int], words: tuple[str, ...]
    ) -> tuple[list[int], list[tuple[str, int]], np.ndarray]:
        return self._embeddings.projection_vectors(ids, words)

    def positions(self, n_positions: int, local: bool = False) -> PositionTables:
        return self._embeddings.positions(n_positions, local)

    # -- generation --------------------------------------------------------------------
    def complete(
        self,
        prompt: str | list[int],
        params: SamplingParams,
        chat: bool = False,
        speculation: Speculation | None = None,
        spec: Interventions | None = None,
    ) -> Completion | SpeculativeRun:
        interventions = None if spec is None else self._with_means(spec, self._engine.encode_prompt(prompt, chat=chat))
        return self._engine.complete(prompt, params, speculate=speculation, chat=chat, interventions=interventions)

    def stepper(self, prompt_ids: list[int], params: SamplingParams, max_steps: int) -> Stepper:
        return Stepper(self._engine, prompt_ids, params, max_steps=max_steps)

    def owns(self, stepper: Stepper) -> bool:
        return stepper.engine is self._engine

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
        if self._server is None:
            raise RuntimeError("this client has no generation server")
        return self._server().submit(prompt, params, chat=chat, interventions=interventions)

    # -- batching ----------------------------------------------------------------------
    def run_batch(
        self,
        prompts: list[str | list[int]],
        params: list[SamplingParams],
        n_slots: int | None = None,
        share_prefixes: bool = False,
        paged: PagedKV | None = None,
    ) -> BatchRun:
        if paged is not None:
            if n_slots is not None or share_prefixes:
                raise ValueError(
                    "a paged run admits by free blocks and always shares prefixes: leave n_slots and "
                    "share_prefixes unset"
                )
            return run_paged_traced(self._engine, prompts, params, paged)
        if n_slots is None:
            return run_static(self._engine, prompts, params)
        return run_continuous(self._engine, prompts, params, n_slots=n_slots, share_prefixes=share_prefixes)

    # -- the weights -------------------------------------------------------------------
    def _tensors(self) -> dict:
        """The model's GGUF tensors by name (the engine's own reader), read once ({} without a GGUF file)."""
        with self._lock:
            if self._file_tensors is None:
                path = gguf_source(self._source)
                self._file_tensors = {} if path is None else file_tensors(path)
            return self._file_tensors

    def file_summary(self) -> FileSummary | None:
        tensors = self._tensors()
        return file_summary(tensors) if tensors else None

    def stored_block(self, tensor: str, row: int = 0, block: int = 0) -> StoredLayout | None:
        return stored_layout(self._tensors(), tensor, row, block)

    def compare_modes(self, others: Mapping[str, EngineClient], ids: list[int], top_n: int = 8) -> ModeComparison:
        engines = {}
        for mode, other in others.items():
            if not isinstance(other, EngineClient):
                raise TypeError(f"mode {mode!r}: an in-process client compares engines in this process only")
            engines[mode] = other._engine
        return compare_engines(engines, ids, top_n)

    # -- experiments -------------------------------------------------------------------
    def _kept(self, kind: str, ids: list[int], compute: Callable[[], object]):
        """``compute()`` for (``kind``, ``ids``), kept for the last prompts (``HELD_PROMPTS`` of each use): a
        patching sweep asks for its setup and its clean streams once per position."""
        key = (kind, tuple(ids))
        with self._lock:
            if key in self._held:
                self._held.move_to_end(key)
                return self._held[key]
        value = compute()
        with self._lock:
            self._held[key] = value
            while len(self._held) > 3 * HELD_PROMPTS:
                self._held.popitem(last=False)
        return value

    def _means(self, ids: list[int]) -> np.ndarray:
        return self._kept("means", ids, lambda: head_means(self._engine, ids))

    def _with_means(self, spec: Interventions | None, ids: list[int]) -> Interventions | None:
        """``spec`` with its mean-ablated heads' means (the prompt's own) filled in when it needs them."""
        if spec is None or not spec.needs_means:
            return spec
        return with_means(spec, self._means(ids))

    def head_importance(self, ids: list[int], target: int, mode: str, factor: float, layer: int) -> np.ndarray:
        means = self._means(ids) if mode == "mean" else None
        return head_importance_layer(self._engine, ids, target, mode, factor, layer, means)

    def patch(self, clean_ids: list[int], corrupt_ids: list[int], positions: Sequence[int] = ()) -> Patching:
        pair = list(clean_ids) + [-1] + list(corrupt_ids)  # the two prompts, as one key
        setup = self._kept("setup", pair, lambda: patch_logits(self._engine, clean_ids, corrupt_ids))
        restored = np.zeros((len(positions), self._info.config.n_layers))  # (P, L)
        if positions:
            streams = self._kept("streams", clean_ids, lambda: clean_streams(self._engine, clean_ids))  # (L, T, D)
            for row, position in enumerate(positions):
                restored[row] = patch_column(self._engine, corrupt_ids, streams, position, setup)
        return Patching(setup, tuple(positions), restored)

    def attribution(self, ids: list[int], target: int, spec: Interventions | None = None) -> AttributionTerms:
        return attribution(self._engine, ids, target, self._with_means(spec, ids))
