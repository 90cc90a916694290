"""The engine: one loaded model plus tokenizer, and the generation loop around them.

Owns ``load_engine``, prompt checks, the step functions every runner calls (``prefill`` /
``decode_step`` for one request, ``prefill_batch`` / ``decode_batch`` for a batch's rows,
``run_layers`` / ``head_logits`` for speculative decoding: one forward each, through an explicit
``KVCache``; the only callers of the model's forward, with the full-recompute and traced forwards
below), the step-by-step ``generate`` generator (and ``speculate``, ``speculative.py``'s), and
the traced forward the explorer reads. It holds weights only: every request
brings its own cache, its own seeded draws and (optionally) its own
interventions (``inference.model.interventions``), so many users can share one
engine. Sampling rules live in ``sampling.py``; text handling in the model's
tokenizer; batching many requests in ``inference.serving``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..model.attribution import LogitAttribution, attribute_logit
from ..model.config import ModelConfig
from ..model.decode_step import StepStatus
from ..model.interventions import Interventions, Spec, head_means
from ..model.kv_cache import KVCache
from ..model.loader import load_model
from ..model.quant import count_parameters
from ..model.tokenizer import StreamDecoder, Tokenizer, TokenizerError, whole_id
from ..model.trace import ForwardTrace
from ..model.transformer import Transformer
from ..threads import set_threads
from .run import StepsRun
from .sampling import Candidate, SampleResult, SamplingParams, finish_reason, generator_for, sample
from .speculative import Speculation, SpeculativeRun, speculate


class PromptError(ValueError):
    """The prompt cannot be run: empty, or longer than the model's context."""


@dataclass
class StepRecord:
    """One generated token and how it came about."""

    index: int  # 0 for the token produced by the prefill
    phase: str  # "prefill" or "decode"
    token_id: int
    token_text: str  # this token's own text
    text: str  # what this step adds to the streamed output (UTF-8 safe)
    probability: float  # of the chosen token after all sampling stages
    top: list[Candidate]
    cache_len: int  # positions in the KV cache after this step (0 without a cache)
    seconds: float  # forward + sampling time of this step
    finish_reason: str | None = None  # "eos", "length" or "context" on the last step
    sample: SampleResult | None = field(default=None, repr=False)


class Engine:
    def __init__(self, model: Transformer, tokenizer: Tokenizer, folder: Path | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config: ModelConfig = model.config
        self.folder = folder
        first = next(model.parameters())
        self.device, self.dtype = first.device, first.dtype  # dtype: of the activations and the KV cache
        self.eos_ids = frozenset(self.config.eos_token_ids) | tokenizer.eos_ids

    @property
    def parameter_count(self) -> int:
        """Weights the model has (tied embeddings once), dense or quantized."""
        return count_parameters(self.model)

    @property
    def weights_description(self) -> str:
        """What the weights are, in words (for the sidebar and the benchmark)."""
        summary = self.model.quantization
        return (
            f"dense {str(self.dtype).removeprefix('torch.')} weights and activations"
            if summary is None
            else summary.describe()
        )

    @property
    def step_status(self) -> StepStatus | None:
        """What runs the one-token decode step when ``compile=True`` was asked for (None when it was not):
        "compiling" (the eager step serves until then), "ready" (one compiled graph per step) or "eager" (why)."""
        if self.model.decode_step is not None:
            return self.model.decode_step.status
        if self.model.compile_note:
            return StepStatus("eager", self.model.compile_note)
        return None

    def wait_for_step(self, timeout: float | None = None) -> StepStatus | None:
        """Block until the compiled decode step is ready or has fallen back (a script or benchmark that wants it)."""
        if self.model.decode_step is not None:
            return self.model.decode_step.wait(timeout)
        return self.step_status

    # -- prompts -----------------------------------------------------------------
    def encode_prompt(self, prompt: str | list[int], chat: bool = False) -> list[int]:
        if isinstance(prompt, str):
            if prompt == "":  # whitespace is text: a single space is a real one-token prompt
                raise PromptError("the prompt is empty: type some text")
            text = self.tokenizer.apply_chat(prompt) if chat else prompt
            ids = self.tokenizer.encode(text)
        else:
            ids = _prompt_ids(prompt)
        if not ids:
            raise PromptError("the prompt has no tokens")
        bad = [i for i in ids if not 0 <= i < self.config.vocab_size]
        if bad:
            raise PromptError(f"token ids {bad[:5]} are outside the vocabulary (0..{self.config.vocab_size - 1})")
        if len(ids) >= self.config.max_seq_len:
            raise PromptError(
                f"the prompt is {len(ids)} tokens but the model's context holds {self.config.max_seq_len} "
                f"(and one more is needed for the answer): shorten it"
            )
        return ids

    def _ids_tensor(self, ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self.device)  # (1, T)

    # -- interventions ---------------------------------------------------------------
    def prepare_interventions(self, interventions: Interventions | None, ids: list[int]) -> Interventions | None:
        """Check a spec against this model and fill in head means over ``ids``' positions; None for no edit.

        Raises ``InterventionError`` (a ``ValueError``) for an edit out of range or an unsupported model.
        """
        if interventions is None:
            return None
        if not isinstance(interventions, Interventions):
            raise TypeError(f"interventions must be an Interventions, got {type(interventions).__name__}")
        interventions.check(self.config)
        if interventions.empty:
            return None
        if interventions.needs_means:
            _, trace = self.traced_forward(ids)
            interventions = interventions.with_means(head_means(trace))
        return interventions

    # -- forward passes ------------------------------------------------------------
    def forward_logits(self, token_ids: list[int], interventions: Interventions | None = None) -> torch.Tensor:
        """Logits (T, V) for every position, float32 on the CPU; full recompute, no cache."""
        ids = self.encode_prompt(token_ids)
        spec = self.prepare_interventions(interventions, ids)
        return self.model(self._ids_tensor(ids), interventions=spec)[0].float().cpu()

    def traced_forward(
        self, token_ids: list[int], interventions: Interventions | None = None, last_only: bool = False
    ) -> tuple[torch.Tensor, ForwardTrace]:
        """Logits (T, V) and every recorded internal of one full forward (under ``interventions`` if given).

        ``last_only``: logits (1, V) of the last position only; a 640-token prompt's (T, V) logits
        over Gemma's 262,144-entry vocabulary would be 671 MB.
        """
        ids = self.encode_prompt(token_ids)
        spec = self.prepare_interventions(interventions, ids)
        trace = ForwardTrace()
        logits = (
            self.model(self._ids_tensor(ids), trace=trace, interventions=spec, last_only=last_only)[0].float().cpu()
        )
        return logits, trace

    def logit_attribution(
        self, token_ids: list[int], token_id: int, interventions: Interventions | None = None
    ) -> LogitAttribution:
        """Direct logit attribution of ``token_id`` at the last position (see ``model/attribution.py``)."""
        ids = self.encode_prompt(token_ids)
        logits, trace = self.traced_forward(ids, interventions)
        last = len(ids) - 1
        patched = [p.layer for p in interventions.patches if p.position == last] if interventions else []
        return attribute_logit(self.model, logits, trace, token_id, last, patched)

    def unembed(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (…, V) for residual-stream vectors (…, D): final norm, then the output matrix.

        Applied to the stream after each block, this is the logit lens.
        """
        with torch.inference_mode():
            x = hidden.to(self.device, self.dtype)
            return self.model.lm_head(self.model.final_norm(x)).float().cpu()

    def new_cache(self, capacity: int, batch_size: int = 1) -> KVCache:
        return KVCache(self.config, capacity, batch_size, self.device, self.dtype)

    def prefill(
        self,
        ids: list[int],
        kv_cache: KVCache,
        trace: ForwardTrace | None = None,
        interventions: Interventions | None = None,
    ) -> torch.Tensor:
        """Run the prompt in one pass, filling the cache; logits (V,) of the last position.

        ``interventions`` (prepared: see ``prepare_interventions``) apply to this forward, so
        the K/V it writes are the intervened ones; ``decode_step`` takes them again.
        """
        return (
            self.model(
                self._ids_tensor(ids), kv_cache=kv_cache, last_only=True, trace=trace, interventions=interventions
            )[0, -1]
            .float()
            .cpu()
        )

    def decode_step(
        self,
        token_id: int,
        kv_cache: KVCache,
        trace: ForwardTrace | None = None,
        interventions: Interventions | None = None,
    ) -> torch.Tensor:
        """Feed one new token, appending its K/V to the cache; logits (V,) for the next one."""
        return (
            self.model(self._ids_tensor([token_id]), kv_cache=kv_cache, trace=trace, interventions=interventions)[0, -1]
            .float()
            .cpu()
        )

    def run_layers(
        self,
        layers: range,
        kv_cache: KVCache,
        token_ids: list[int] | None = None,
        stream: torch.Tensor | None = None,
        interventions: Interventions | None = None,
    ) -> torch.Tensor:
        """The residual stream (1, T, D) after blocks ``layers`` at the cache's next positions, from ``token_ids``
        (a range from layer 0) or from ``stream`` (1, T, D) entering ``layers.start``; only those blocks' K/V
        are written (``Transformer.forward_layers``: self-speculation's draft and its verifier)."""
        ids = None if token_ids is None else self._ids_tensor(token_ids)
        return self.model.forward_layers(layers, ids, stream, kv_cache=kv_cache, interventions=interventions)

    def head_logits(self, stream: torch.Tensor) -> torch.Tensor:
        """Logits (T, V), float32 on the CPU, of a stream (1, T, D) after the last block it went through."""
        return self.unembed(stream[0])

    def prefill_batch(
        self,
        ids: torch.Tensor,
        kv_cache: KVCache | None = None,
        positions: torch.Tensor | None = None,
        padding_mask: torch.Tensor | None = None,
        interventions: Spec = None,
    ) -> torch.Tensor:
        """One forward of a batch's new positions ``ids`` (B, T) (left-padded under ``padding_mask``, at
        ``positions``; through ``kv_cache`` when given, else the whole sequences); logits (B, V) of each row's
        last position. ``interventions``: one spec per row, or one for all."""
        return (
            self.model(
                ids.to(self.device),
                kv_cache=kv_cache,
                positions=None if positions is None else positions.to(self.device),
                padding_mask=None if padding_mask is None else padding_mask.to(self.device),
                last_only=True,
                interventions=interventions,
            )[:, -1]
            .float()
            .cpu()
        )

    def decode_batch(
        self,
        token_ids: torch.Tensor,
        kv_cache: KVCache,
        positions: torch.Tensor | None = None,
        interventions: Spec = None,
    ) -> torch.Tensor:
        """Feed each row one new token ``token_ids`` (B, 1) at ``positions`` (default: after its cached ones),
        appending its K/V to ``kv_cache``; logits (B, V) for each row's next token."""
        return (
            self.model(
                token_ids.to(self.device),
                kv_cache=kv_cache,
                positions=None if positions is None else positions.to(self.device),
                interventions=interventions,
            )[:, -1]
            .float()
            .cpu()
        )

    def recompute_last(self, ids: list[int], interventions: Interventions | None = None) -> torch.Tensor:
        """The no-cache path: the whole sequence again, logits (V,) of the last position."""
        return self.model(self._ids_tensor(ids), last_only=True, interventions=interventions)[0, -1].float().cpu()

    # -- generation ----------------------------------------------------------------
    def generate(
        self,
        prompt: str | list[int],
        params: SamplingParams | None = None,
        use_cache: bool = True,
        chat: bool = False,
        record_sampling: bool = False,
        top_n: int = 5,
        interventions: Interventions | None = None,
    ) -> Iterator[StepRecord]:
        """Yield one ``StepRecord`` per generated token until EOS, max tokens or the context end.

        ``interventions`` stay on for every step: the prompt's forward and each decode step.
        """
        params = params or SamplingParams()
        ids = self.encode_prompt(prompt, chat=chat)
        spec = self.prepare_interventions(interventions, ids)
        decoder = StreamDecoder(self.tokenizer)
        capacity = min(len(ids) + params.max_new_tokens, self.config.max_seq_len)
        kv_cache = self.new_cache(capacity) if use_cache else None

        next_input: int | None = None
        generated: list[int] = []
        for index in range(params.max_new_tokens):
            started = time.perf_counter()
            # 1. forward: the prompt once (prefill), then one token per step (decode)
            if kv_cache is None:
                logits = self.recompute_last(ids, interventions=spec)
            elif next_input is None:
                logits = self.prefill(ids, kv_cache, interventions=spec)
            else:
                logits = self.decode_step(next_input, kv_cache, interventions=spec)
            # 2. sample the next token: draw ``index`` of this request's seeded stream
            choice = sample(logits, params, generator_for(params, index), previous_ids=ids, record=record_sampling)
            seconds = time.perf_counter() - started
            ids.append(choice.token_id)
            generated.append(choice.token_id)
            next_input = choice.token_id
            # 3. why (and whether) to stop: the same rule as the batching runners
            finish = finish_reason(params, self.eos_ids, generated, len(ids), self.config.max_seq_len)
            text = decoder.push(choice.token_id) if finish is None else decoder.push(choice.token_id) + decoder.flush()
            yield StepRecord(
                index=index,
                phase="prefill" if index == 0 else "decode",
                token_id=choice.token_id,
                token_text=self.tokenizer.decode([choice.token_id]),
                text=text,
                probability=choice.probability,
                top=self.top_candidates(logits, top_n),
                cache_len=kv_cache.length if kv_cache else 0,
                seconds=seconds,
                finish_reason=finish,
                sample=choice if record_sampling else None,
            )
            if finish is not None:
                return

    def top_candidates(self, logits: torch.Tensor, n: int = 5) -> list[Candidate]:
        """The ``n`` most probable next tokens under softmax(logits) at T = 1."""
        probs = logits.softmax(-1)
        values, indices = probs.topk(min(n, probs.numel()))
        return [Candidate(int(i), self.tokenizer.decode([int(i)]), float(p)) for p, i in zip(values, indices)]

    # Speculative decoding (``speculative.py``): one ``SpeculativeStep`` per forward of the model, the output
    # distributed as ``generate``'s (greedy: the same tokens). The function itself, bound: this engine is its parts.
    speculate = speculate

    def complete(
        self,
        prompt: str | list[int],
        params: SamplingParams | None = None,
        speculate: Speculation | None = None,
        **kwargs,
    ) -> Completion | SpeculativeRun:
        """Run ``generate`` to the end and gather the result; with ``speculate``, ``speculate`` instead."""
        if speculate is not None:
            return SpeculativeRun(speculate, list(self.speculate(prompt, params, speculate, **kwargs)))
        steps = list(self.generate(prompt, params, **kwargs))
        return Completion(steps)


@dataclass
class Completion(StepsRun):
    steps: list[StepRecord]

    @property
    def token_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]


def load_engine(
    model: str | Path | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    threads: int | None = None,
    quant: str | None = None,
    compile: bool = False,
    kernel: str | None = None,
) -> Engine:
    """Load a model for inference: the embedded SmolLM2-135M-Instruct by default.

    ``model`` is a ``.gguf`` file, a local Hugging Face folder or a hub id; ``quant`` keeps
    a GGUF's own quantized blocks ("gguf") or quantizes on load ("int8", "int4"), None for
    dense weights; ``compile`` compiles the one-token decode step with torch.compile (the
    first step then takes some seconds); ``threads`` sets torch's CPU threads for the
    process (``None`` leaves them as they are); ``kernel`` names what multiplies by a quantized
    model's weight groups (``inference.model.kernels.KERNELS``; None: the one for this CPU).
    """
    if threads is not None:
        set_threads(threads)
    loaded = load_model(model, device=device, dtype=dtype, quant=quant, compile=compile, kernel=kernel)
    return Engine(loaded.transformer, loaded.tokenizer, folder=loaded.folder)


__all__ = ["Engine", "StepRecord", "Candidate", "Completion", "PromptError", "TokenizerError", "load_engine"]


def _prompt_ids(prompt: object) -> list[int]:
    """A prompt given as ids: ints (numpy's and torch's too), else ``PromptError``; a float id is refused, not
    truncated (``1.7`` is no token), and so are bools, text and ``None``."""
    if isinstance(prompt, (bytes, bytearray)) or not hasattr(prompt, "__iter__"):
        raise PromptError(f"the prompt must be text or a list of token ids, got {type(prompt).__name__}")
    return [whole_id(item, PromptError) for item in prompt]
