"""The one seam between the explorer's pages and an engine: a ``Backend`` Protocol, its records, its pure helpers.

Who reads this: someone plugging another engine (a GPU engine on another machine, say) under the
explorer. Implement ``Backend`` (24 methods and two attributes, grouped in the facets below) and the
pages work unchanged: ``pages/`` and ``ui/`` import nothing of ``inference`` but this module
(``tests/test_layout.py`` enforces it), and ``tests/test_api_contract.py`` runs the same assertions
against every implementation. The two here are ``EngineClient`` (the engine in this process) and
``ChildClient`` (its forwards in the engine server's own process, ``inference.serving.process``).

The rules a backend keeps:

- **Plain values across.** Arguments are token ids (``list[int]``), text, ``SamplingParams``,
  ``Interventions`` specs without tensors and numpy arrays; results are numpy arrays, Python numbers
  and the frozen dataclasses re-exported below (each defined once, in ``inference.inspection`` or the
  engine; a UI view that adds display text extends one, ``class LogitLens(Lens)``, never copies it). Nothing returned holds a torch tensor, so any
  result pickles, caches in ``st.cache_data`` and could come over a socket.
- **Text stays on the caller's side.** ``tokenizer`` is the model's ``Tokenizer`` (the public wrapper:
  ``encode``, ``raw_tokens``, ``piece_bytes``, ``special_ids``, the chat template). A remote backend ships
  its tokenizer file and builds one locally; every page's token texts are drawn from it.
- **Specs are plain.** An ``Interventions`` spec travels without tensors; where it replaces heads by
  their means over the prompt, the backend computes those means itself (once per prompt).
- **Errors are the library's.** A prompt that cannot run raises ``PromptError``; a bad spec
  ``InterventionError``; bad settings ``SamplingError``; a full server ``BusyError``.
- **Handles run where they were made.** ``stepper`` and ``submit`` return objects of one walk or one
  request (``Stepper``, ``RequestHandle``); a page keeps them and asks the backend whether a kept walk is
  still its own (``owns``). ``cache_view`` and ``cache_bytes`` read a walk's own cache.

Pure helpers (no model: they run wherever the caller is, on numbers a backend returned):
``recorded_draw`` and ``draw_ids`` (the sampler's seeded draws from a logits row), ``memory_read_speed`` (this machine's memory, measured now),
``padded_batch`` (how static batching pads rows), ``decode_speed`` (greedy tok/s, timed through
``Backend.complete``, so any backend's), ``cache_view``/``cache_bytes`` (read off a walk's own cache),
``decode_block``/``kernel_held`` (a stored block's bytes in, its codes and what the 4-bit kernel holds out).

What a backend on another machine must still decide: a ``Stepper`` and a ``RequestHandle`` are
objects of this process today (a remote backend returns objects with the same methods, driving its
engine by messages, as ``ProcessServer`` does for ``submit``); ``compare_modes`` takes the other modes'
backends of the same implementation; ``memory_read_speed`` and ``measure_cache_timing`` time the
machine they run on (the first the caller's, the second the backend's).

The module also re-exports what a page needs around the seam: the errors, ``SamplingParams``,
``Interventions`` and its edits, and, for the one place that builds backends
(``ui/common/resources.py``), ``load_engine``, the servers and their settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from . import (
    number_text,  # the one parser of numbers from outside (links, settings, typed text)
    settings,
)
from .generation.engine import Candidate, Completion, Engine, PromptError, StepRecord, load_engine
from .generation.sampling import SamplingError, SamplingParams
from .generation.speculative import Speculation, SpeculationError, SpeculativeRun
from .generation.stepper import Stepper, StepperError
from .inspection.attention import AttentionArrays, WindowView
from .inspection.blocks import BLOCK_SIZES, KERNEL_TYPES, BlockLayout, StoredLayout, decode_block, kernel_held
from .inspection.cache import CacheBytes, CacheTiming, CacheView, cache_bytes, cache_view
from .inspection.embeddings import PositionTables
from .inspection.experiments import AttributionTerms, Patching, PatchLogits
from .inspection.info import ModelInfo
from .inspection.residual import BlockWalk, LastPosition, Lens, TracedPrompt
from .inspection.sampling import RecordedDraw, draw_ids, recorded_draw
from .inspection.weights import FileSummary, ModeComparison, memory_read_speed
from .model.interventions import EdgeCut, HeadEdit, InterventionError, Interventions, MLPEdit
from .model.kv_cache import causal_padding_mask
from .model.loader import gguf_source
from .model.memory import limit_heap_arenas, release_freed_memory
from .model.packages import GEMMA3_270M, SMOLLM2, install_hint, is_installed
from .model.tokenizer import Tokenizer, TokenizerError, parse_merges
from .serving.client import EngineClient
from .serving.config import ServeConfig
from .serving.padding import left_pad
from .serving.paging_records import EVENT_KINDS, PagedKV, PagingEvent, PagingStep, PagingTrace
from .serving.process import ChildClient, ProcessServer
from .serving.requests import BatchRun
from .serving.server import BusyError, EngineServer, RequestHandle
from .settings import ModelListError, SettingsError, checked_model_name
from .threads import available_cores, set_threads


# -- the facets ------------------------------------------------------------------------------------------
@runtime_checkable
class TextFacet(Protocol):
    """The model's facts and its text: what a page needs before any forward."""

    info: ModelInfo  # config, dtype, sizes, the weights in words, what the decode step runs now
    tokenizer: Tokenizer  # on the caller's side (see the module docstring)

    def encode_prompt(self, prompt: str | list[int], chat: bool = False) -> list[int]:
        """The prompt's token ids (with the chat template when ``chat``); ``PromptError`` when it cannot run."""
        ...


@runtime_checkable
class ForwardFacet(Protocol):
    """One forward of a prompt, and what it records."""

    def last_logits(self, ids: list[int]) -> np.ndarray:
        """Logits (V,) of the last position of ``ids``."""
        ...

    def next_token_probs(self, ids: list[int], spec: Interventions | None = None) -> np.ndarray:
        """softmax (V,), float64, of the last position under ``spec``."""
        ...

    def attention(self, ids: list[int]) -> AttentionArrays:
        """Every layer's and head's attention (with the queries and keys) of one traced forward of ``ids``."""
        ...

    def window(self, ids: list[int], pooled_cells: int) -> WindowView:
        """The sliding window's effect on one traced forward of ``ids`` (longer than the window), pooled."""
        ...

    def trace(self, ids: list[int], keep_from: int | None = None, spec: Interventions | None = None) -> TracedPrompt:
        """The block walk and the logit lens (from position ``keep_from``; default: the last 16) of one traced
        forward of ``ids`` under ``spec``."""
        ...

    def last_position(self, ids: list[int]) -> LastPosition:
        """One traced forward of ``ids`` read at its last position (the Overview picture)."""
        ...


@runtime_checkable
class EmbeddingFacet(Protocol):
    """The embedding matrix and the position encodings, read from the model's own weights."""

    def embedding_rows(self, ids: list[int]) -> np.ndarray:
        """The rows (T, D) the ids select."""
        ...

    def nearest(self, token_id: int, k: int = 12) -> list[tuple[int, float]]:
        """(id, cosine) of the ``k`` rows pointing most nearly the same way as ``token_id``'s, itself excluded."""
        ...

    def word_cosines(self, word: str, others: tuple[str, ...]) -> list[float]:
        """Cosine of ``word``'s (mean) row with each of ``others``'."""
        ...

    def projection_vectors(
        self, ids: list[int], words: tuple[str, ...]
    ) -> tuple[list[int], list[tuple[str, int]], np.ndarray]:
        """(the prompt's distinct ids; (word, its token count) per word drawn; their rows (N, D))."""
        ...

    def positions(self, n_positions: int, local: bool = False) -> PositionTables:
        """Positions 0..n-1 as the model encodes them: RoPE's tables (of its local layers when ``local``) or
        the learned position rows."""
        ...


@runtime_checkable
class GenerationFacet(Protocol):
    """Generation, step by step or to the end, alone or on the shared server."""

    def complete(
        self,
        prompt: str | list[int],
        params: SamplingParams,
        chat: bool = False,
        speculation: Speculation | None = None,
        spec: Interventions | None = None,
    ) -> Completion | SpeculativeRun:
        """One request run alone to its end: every ``StepRecord`` with its time (``spec`` on at every step);
        with ``speculation``, decoded speculatively (a ``SpeculativeRun``: drafts, p and q, the draws)."""
        ...

    def stepper(self, prompt_ids: list[int], params: SamplingParams, max_steps: int) -> Stepper:
        """A new walk through generation for one session (its own KV cache)."""
        ...

    def owns(self, stepper: Stepper) -> bool:
        """Whether ``stepper`` walks this backend's model (a walk from before a model switch does not)."""
        ...

    def measure_cache_timing(
        self, prompt_ids: list[int], n_tokens: int, progress: Callable[[float, str], None] | None = None
    ) -> CacheTiming:
        """Decoding with the KV cache against without it, timed now."""
        ...

    def submit(
        self,
        prompt: str | list[int],
        params: SamplingParams | None = None,
        chat: bool = False,
        interventions: Interventions | None = None,
    ) -> RequestHandle:
        """Queue a request on the model's shared generation server (batched with every session's)."""
        ...


@runtime_checkable
class BatchingFacet(Protocol):
    """Several requests batched together, timed for the Batching page."""

    def run_batch(
        self,
        prompts: list[str | list[int]],
        params: list[SamplingParams],
        n_slots: int | None = None,
        share_prefixes: bool = False,
        paged: PagedKV | None = None,
    ) -> BatchRun:
        """``prompts`` batched statically (``n_slots`` None: one batch, padded, to the longest's end) or
        continuously in ``n_slots`` slots (optionally sharing common prefixes' cache); with ``paged``, continuously
        on paged KV blocks, ``paged.samples`` answers per prompt, recorded step by step (``BatchRun.paging``, a
        ``PagingTrace``: the block pool, every table and what the block manager did)."""
        ...


@runtime_checkable
class WeightsFacet(Protocol):
    """The weights as the model file stores them, and the model in other weights modes."""

    def file_summary(self) -> FileSummary | None:
        """The GGUF file's bytes, weights per block type and block tensors; None for a float checkpoint."""
        ...

    def stored_block(self, tensor: str, row: int = 0, block: int = 0) -> StoredLayout | None:
        """Block ``block`` of row ``row`` of ``tensor`` as the file stores it; None when absent or not a block
        type read here."""
        ...

    def compare_modes(self, others: Mapping[str, Backend], ids: list[int], top_n: int = 8) -> ModeComparison:
        """``ids`` through this model in several weights modes (mode -> its backend, "none" the float32
        reference), against float32."""
        ...


@runtime_checkable
class ExperimentFacet(Protocol):
    """The model under interventions: what each head and position contributes."""

    def head_importance(self, ids: list[int], target: int, mode: str, factor: float, layer: int) -> np.ndarray:
        """log p(target) with each head of ``layer`` changed alone (H,): scaled by ``factor``, or replaced by its
        mean over the prompt (``mode`` "mean")."""
        ...

    def patch(self, clean_ids: list[int], corrupt_ids: list[int], positions: Sequence[int] = ()) -> Patching:
        """Activation patching: both prompts' answers and gaps, and the share of the clean answer restored by
        patching each of ``positions`` after each block."""
        ...

    def attribution(self, ids: list[int], target: int, spec: Interventions | None = None) -> AttributionTerms:
        """``target``'s logit at the last position split into labelled terms (under ``spec``)."""
        ...


@runtime_checkable
class Backend(
    TextFacet, ForwardFacet, EmbeddingFacet, GenerationFacet, BatchingFacet, WeightsFacet, ExperimentFacet, Protocol
):
    """Everything a page reads of a model (see the module docstring)."""


FACETS = (TextFacet, ForwardFacet, EmbeddingFacet, GenerationFacet, BatchingFacet, WeightsFacet, ExperimentFacet)


def members(protocol: type) -> set[str]:
    """The public names (methods and attributes) ``protocol`` asks of a backend."""
    names = set(getattr(protocol, "__annotations__", {}))
    for klass in protocol.__mro__:
        if klass in (Protocol, object, Backend) or klass.__module__ == "typing":
            continue
        names |= {name for name in vars(klass) if not name.startswith("_")}
        names |= set(getattr(klass, "__annotations__", {}))
    return names


# -- pure helpers over what a backend returns ------------------------------------------------------------
def padded_batch(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``rows`` left-padded exactly as static batching pads them: ids, real-token mask and positions (B, T), and
    each row's attention mask (B, T, T)."""
    ids, mask, positions = left_pad(rows)  # each (B, T)
    masks = causal_padding_mask(mask, 0)[:, 0]  # (B, 1, T, T) -> (B, T, T)
    return ids.numpy(), mask.numpy(), positions.numpy(), masks.numpy()


def decode_speed(backend: Backend, prompt_ids: list[int], n_tokens: int = 24) -> float:
    """Greedy decode tok/s after the prompt (its last 64 tokens), measured now (the steps after the first; a
    two-token run first, so the measured one finds everything warm)."""
    warm = SamplingParams(temperature=0, max_new_tokens=2, stop_on_eos=False)
    backend.complete(prompt_ids[-64:], warm)
    steps = backend.complete(
        prompt_ids[-64:], SamplingParams(temperature=0, max_new_tokens=n_tokens, stop_on_eos=False)
    )
    return (len(steps.steps) - 1) / sum(s.seconds for s in steps.steps[1:])


__all__ = [
    "number_text",
    "Backend",
    "FACETS",
    "TextFacet",
    "ForwardFacet",
    "EmbeddingFacet",
    "GenerationFacet",
    "BatchingFacet",
    "WeightsFacet",
    "ExperimentFacet",
    "members",
    # records
    "AttentionArrays",
    "AttributionTerms",
    "BatchRun",
    "BlockLayout",
    "BlockWalk",
    "CacheBytes",
    "CacheTiming",
    "CacheView",
    "Candidate",
    "Completion",
    "FileSummary",
    "LastPosition",
    "Lens",
    "ModeComparison",
    "ModelInfo",
    "Patching",
    "PatchLogits",
    "PagingEvent",
    "PagingStep",
    "PagingTrace",
    "PositionTables",
    "RecordedDraw",
    "SpeculativeRun",
    "StepRecord",
    "StoredLayout",
    "TracedPrompt",
    "WindowView",
    # pure helpers
    "BLOCK_SIZES",
    "KERNEL_TYPES",
    "cache_bytes",
    "cache_view",
    "decode_block",
    "decode_speed",
    "draw_ids",
    "kernel_held",
    "memory_read_speed",
    "padded_batch",
    "recorded_draw",
    # what a page passes and catches
    "BusyError",
    "EdgeCut",
    "HeadEdit",
    "InterventionError",
    "Interventions",
    "MLPEdit",
    "PagedKV",
    "EVENT_KINDS",
    "PromptError",
    "SamplingError",
    "SamplingParams",
    "Speculation",
    "SpeculationError",
    "Stepper",
    "StepperError",
    "Tokenizer",
    "TokenizerError",
    "parse_merges",
    "RequestHandle",
    # building backends (ui/common/resources.py, ui/common/models.py)
    "ChildClient",
    "Engine",
    "EngineClient",
    "EngineServer",
    "ProcessServer",
    "ServeConfig",
    "available_cores",
    "gguf_source",
    "load_engine",
    "release_freed_memory",
    "limit_heap_arenas",
    "set_threads",
    "settings",
    "GEMMA3_270M",
    "SMOLLM2",
    "install_hint",
    "is_installed",
    "ModelListError",
    "SettingsError",
    "checked_model_name",
]
