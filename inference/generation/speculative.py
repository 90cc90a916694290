"""Speculative decoding: a cheap draft guesses several tokens, one forward of the model checks them all.

Owns ``Speculation`` (the per-request setting, validated), ``speculate`` (a generator: one
``SpeculativeStep`` per forward of the model, through the request's own ``KVCache``) and the records the
explorer reads (plain numbers and ``Candidate`` lists, no tensors). Two drafters:

- **prompt lookup** (``"lookup"``): the sequence's last n tokens (n = ``ngram``, then shorter) matched
  against the prompt and the text so far; the tokens that followed the latest earlier match are the draft.
  No second model. No match: an ordinary one-token step;
- **self-speculation** (``"self"``): the model's first ``layers`` blocks, then its final norm and output
  matrix. Those blocks' K/V are the full model's own for those positions, so the verifier runs only the
  remaining blocks, over the draft's residual stream (``Transformer.forward_layers``).

The rule (Leviathan et al. 2023; Chen et al. 2023): p is the model's distribution at a drafted position and
q the draft's, both after the request's sampling stages (``sampling.filtered_probs``: repetition penalty,
temperature, top-k, top-p, min-p). A drafted x is kept with probability min(1, p(x)/q(x)); the first one
rejected is replaced by a draw from normalize(max(0, p − q)); when every draft is kept, one more token comes
from p. Each output token is then distributed exactly as plain decoding's. Greedy: keep while x is p's
argmax, and the replacement is the argmax. The cache is cut back (``KVCache.truncate``) to what was kept.
The first step's forward is the prompt's, and it checks a draft too (lookup finds one in the prompt itself).

Draws follow the one seed rule (``generator_for``): generated token i takes its numbers from draw i's
generator, in this order: the draft's pick from q (self-speculation), the acceptance u, the residual draw.
A drafted token's generator is never read by a step whose kept tokens came before it, so a position re-drafted
after a rejection gets numbers the kept text never depended on. Prompt lookup's q is a point mass on x, so
min(1, p/q) = p(x) and the residual is p without x: the one u that plain decoding draws on p's ranges decides
both (x kept when u lands in x's range), and seeded lookup output is plain decoding's, token for token.

Batches: one request at a time (``serving.server.EngineServer`` runs a speculative request at batch 1 beside
its batched ones). Rows of a batch keep different numbers of drafts per step, so their caches would need
lengths of their own (``KVCache`` keeps one write position for every row).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import torch

from ..model.config import ModelConfig
from ..model.interventions import Interventions
from ..model.kv_cache import KVCache
from ..model.tokenizer import StreamDecoder, Tokenizer
from ..model.tolerances import model_tolerance
from ..number_text import NumberError, whole
from .run import StepsRun
from .sampling import (
    Candidate,
    Ranges,
    SamplingParams,
    argmax,
    draw,
    filtered_probs,
    finish_reason,
    generator_for,
    total,
)

DRAFTERS = ("lookup", "self")
MAX_DRAFT_TOKENS = 16
# 7: a verifying forward then covers 8 positions, and on a CPU ATen's 4-bit product costs about the same for
# 5 to 8 rows (docs/speculative.md); the adaptive length shrinks it where drafts are rejected
DEFAULT_DRAFT_TOKENS = 7
PATH_UNITS = 4  # bf16 products: how far (in units in the last place of the largest logit) a logit may move between a
# one-row and a many-row forward: measured worst 2.0 (SmolLM2) and 2.5 (Gemma 3), checked by the tests on each machine


class SpeculationError(ValueError):
    """A speculation setting that cannot run: an unknown drafter, a draft length or depth out of range."""


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Speculation:
    """How one request speculates: the drafter, how many tokens it drafts per step, and its own setting."""

    drafter: str = "lookup"  # "lookup" (prompt lookup) or "self" (the model's first ``layers`` blocks)
    draft_tokens: int = DEFAULT_DRAFT_TOKENS  # the most tokens drafted per step (fewer near the budget or the end)
    ngram: int = 3  # lookup: the longest n-gram matched (then n - 1, ..., 1)
    layers: int | None = None  # self: the draft's depth k, 1 .. n_layers - 1
    adaptive: bool = (
        True  # the draft length follows the kept drafts (``next_draft_length``); False: always draft_tokens
    )

    def __post_init__(self) -> None:
        if self.drafter not in DRAFTERS:
            raise SpeculationError(f"drafter must be one of {', '.join(DRAFTERS)}, got {self.drafter!r}")
        if not (_whole(self.draft_tokens) and 1 <= self.draft_tokens <= MAX_DRAFT_TOKENS):
            raise SpeculationError(
                f"draft_tokens must be a whole number in 1..{MAX_DRAFT_TOKENS}, got {self.draft_tokens!r}"
            )
        if self.drafter == "lookup" and not (_whole(self.ngram) and self.ngram >= 1):
            raise SpeculationError(f"prompt lookup's n-gram length must be a whole number >= 1, got {self.ngram!r}")
        if not isinstance(self.adaptive, bool):
            raise SpeculationError(f"adaptive must be True or False, got {self.adaptive!r}")
        if self.drafter == "self" and not (_whole(self.layers) and self.layers >= 1):
            raise SpeculationError(
                f"self-speculation needs its draft depth: a whole number of layers >= 1, got {self.layers!r}"
            )

    @classmethod
    def parse(cls, text: str, draft_tokens: int = DEFAULT_DRAFT_TOKENS) -> Speculation:
        """``"lookup"``, ``"lookup:n"`` (n-gram length) or ``"self:k"`` (draft depth), as the command line takes it;
        ``":fixed"`` at the end drafts ``draft_tokens`` every step (default: the adaptive length)."""
        body = text.strip()
        adaptive = not body.endswith(":fixed")
        body = body if adaptive else body[: -len(":fixed")]
        name, _, number = body.partition(":")
        if name not in DRAFTERS:
            raise SpeculationError(f"speculate as lookup, lookup:n or self:k (then :fixed or not), got {text!r}")
        if name == "self" and not number:
            raise SpeculationError(f"self-speculation needs its depth: self:k with k layers, got {text!r}")
        value = None
        if number:
            try:
                value = whole(number)
            except NumberError:
                raise SpeculationError(f"{number!r} in {text!r} is not a whole number") from None
        if name == "lookup":
            return cls("lookup", draft_tokens, ngram=3 if value is None else value, adaptive=adaptive)
        return cls("self", draft_tokens, layers=value, adaptive=adaptive)

    def check(self, n_layers: int) -> None:
        """Raise ``SpeculationError`` unless the draft fits a model of ``n_layers`` blocks."""
        if self.drafter == "self" and self.layers >= n_layers:
            raise SpeculationError(
                f"self-speculation drafts with fewer blocks than the model's {n_layers}: choose 1..{n_layers - 1} "
                f"layers, got {self.layers}"
            )

    def describe(self) -> str:
        length = (
            f"up to {self.draft_tokens} tokens a step, adaptive"
            if self.adaptive
            else f"{self.draft_tokens} tokens a step"
        )
        if self.drafter == "lookup":
            return f"prompt lookup (n-grams up to {self.ngram}, {length})"
        return f"self-speculation (the first {self.layers} layers, {length})"

    def next_draft_length(self, length: int, drafted: int, accepted: int) -> int:
        """The draft length after a step that drafted ``drafted`` tokens at ``length`` and kept ``accepted``.

        Adaptive (transformers' "heuristic" schedule for assisted generation): two more after a step whose drafts
        were all kept, one fewer (at least 1) after a rejection, at most ``draft_tokens``. A forward over more
        positions costs more (on a CPU, ATen's 4-bit product takes rows four at a time: see docs/speculative.md),
        so a draft that is often wrong shrinks to one token a step, and one that is always right grows back.
        A step that drafted nothing (no n-gram matched) leaves the length as it was.
        """
        if not self.adaptive or drafted == 0:
            return length
        if accepted == drafted:
            return min(self.draft_tokens, length + 2)
        return max(1, length - 1)


class EngineParts(Protocol):
    """What a speculative request uses of ``generation.engine.Engine`` (named here: that module imports this one)."""

    config: ModelConfig
    tokenizer: Tokenizer
    eos_ids: frozenset[int]

    def encode_prompt(self, prompt: str | list[int], chat: bool = False) -> list[int]: ...
    def prepare_interventions(self, interventions: Interventions | None, ids: list[int]) -> Interventions | None: ...
    def new_cache(self, capacity: int, batch_size: int = 1) -> KVCache: ...
    def prefill(self, ids: list[int], kv_cache: KVCache, interventions: Interventions | None = None): ...
    def decode_step(self, token_id: int, kv_cache: KVCache, interventions: Interventions | None = None): ...
    def run_layers(self, layers: range, kv_cache: KVCache, token_ids=None, stream=None, interventions=None): ...
    def head_logits(self, stream: torch.Tensor) -> torch.Tensor: ...


# -- the records -------------------------------------------------------------------------------------------
@dataclass
class DraftCheck:
    """One drafted token and how the model judged it."""

    position: int  # its index among the generated tokens (0: the token the prompt's forward chose)
    token_id: int
    text: str
    q: float  # the draft's probability of it (1.0 for prompt lookup: a point mass)
    p: float  # the model's, after the same sampling stages
    accept_probability: float  # min(1, p / q); greedy: 1 when it is the model's argmax, else 0
    u: float | None  # the uniform draw that decided (None when greedy)
    accepted: bool
    p_top: list[Candidate]  # the model's most probable tokens here (after the stages)
    q_top: list[Candidate]  # the draft's (just this token for prompt lookup)
    draft_u: float | None = None  # self-speculation, sampling: the draw that picked this token from q
    p_range: tuple[float, float] | None = None  # prompt lookup, sampling: its range of p on [0, 1); kept iff u in it


@dataclass
class FinalToken:
    """The token a step ends with: drawn after the first rejection, after every draft was kept, or alone."""

    position: int
    token_id: int
    text: str
    kind: str  # "residual" (after a rejection), "bonus" (every draft kept) or "plain" (nothing drafted)
    probability: float  # of this token in the distribution it was drawn from
    u: float | None  # None when greedy
    distribution: list[Candidate]  # that distribution's top entries: normalize(max(0, p - q)) or p
    rejected_mass: float | None = None  # residual: sum of max(0, p - q), the chance that a draft is rejected here


@dataclass
class SpeculativeStep:
    """One forward of the model: over the tokens not cached yet (the prompt, then the last token) and the draft."""

    index: int
    phase: str  # "prefill" (the prompt's forward, with a draft or not), "verify" (a draft) or "plain" (none)
    checks: list[DraftCheck]  # the drafted tokens in order, as far as they were judged (empty: nothing drafted)
    final: FinalToken
    token_ids: list[int]  # what this step adds to the output: the kept drafts, then the final token (cut at a stop)
    text: str  # the same, as streamed text (UTF-8 safe)
    cache_len: int  # positions in the KV cache after the step
    seconds: float  # drafting, the forward and the judging
    draft_seconds: float = 0.0
    ngram: int | None = None  # prompt lookup: the length of the n-gram matched (None: no match)
    match_start: int | None = None  # prompt lookup: where in the sequence the matched n-gram starts
    finish_reason: str | None = None
    draft_length: int = 0  # the draft length this step asked for (the adaptive schedule's, before any budget cut)

    @property
    def drafted(self) -> int:
        return len(self.checks)

    @property
    def accepted(self) -> int:
        return sum(check.accepted for check in self.checks)


@dataclass
class SpeculativeRun(StepsRun):
    """Every step of one speculative request, with its totals."""

    speculation: Speculation
    steps: list[SpeculativeStep] = field(default_factory=list)

    @property
    def token_ids(self) -> list[int]:
        return [token for step in self.steps for token in step.token_ids]

    @property
    def drafted(self) -> int:
        return sum(step.drafted for step in self.steps)

    @property
    def accepted(self) -> int:
        return sum(step.accepted for step in self.steps)

    @property
    def acceptance_rate(self) -> float | None:
        """Kept drafts over drafted tokens (None when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def forwards(self) -> int:
        """Forwards of the model: one per step, the prompt's included."""
        return len(self.steps)

    @property
    def tokens_per_forward(self) -> float | None:
        """Generated tokens per forward of the model (1.0 for plain decoding)."""
        return len(self.token_ids) / self.forwards if self.forwards else None

    @property
    def decode_seconds(self) -> float:
        """Time of every step after the first (whose forward is the prompt's)."""
        return sum(step.seconds for step in self.steps[1:])


# -- the drafters --------------------------------------------------------------------------------------------
def lookup_draft(ids: list[int], ngram: int, count: int) -> tuple[list[int], int | None, int | None]:
    """(draft, n, start): the ``count`` tokens that followed the latest earlier occurrence of ``ids``' last n
    tokens, for the longest n <= ``ngram`` that occurs earlier; ([], None, None) when none does."""
    for n in range(min(ngram, len(ids) - 1), 0, -1):
        pattern, last = ids[-n:], ids[-1]
        for start in range(len(ids) - n - 1, -1, -1):  # latest first; the match is followed by >= 1 token
            if ids[start + n - 1] == last and ids[start : start + n] == pattern:
                return ids[start + n : start + n + count], n, start
    return [], None, None


@dataclass
class _Draft:
    tokens: list[int]
    q: list[torch.Tensor | None]  # (V,) each; None for prompt lookup (a point mass)
    generators: list[torch.Generator | None]  # draw i's generator, already read for the pick from q
    draft_us: list[float | None]
    streams: list[torch.Tensor]  # self: the stream after the draft's layers at each fed position, (1, 1, D) each
    ngram: int | None = None
    match_start: int | None = None


def _draw(
    probs: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[int, float, float | None]:
    """(token, probability, u) drawn from ``probs`` as ``sample`` draws: the argmax when greedy, else one u on
    the ranges."""
    if params.greedy:
        return argmax(probs), 1.0, None
    return draw(probs, generator)


class _Request:
    """One speculative request's state: its sequence, cache and output (see ``speculate``)."""

    def __init__(
        self,
        engine: EngineParts,
        ids: list[int],
        params: SamplingParams,
        speculation: Speculation,
        interventions: Interventions | None,
        top_n: int,
    ) -> None:
        self.engine, self.params, self.speculation = engine, params, speculation
        self.interventions, self.top_n = interventions, top_n
        self.ids = ids  # the prompt, then every generated token (the last one not yet in the cache)
        self.generated: list[int] = []
        capacity = min(len(ids) + params.max_new_tokens, engine.config.max_seq_len)
        self.kv_cache: KVCache = engine.new_cache(capacity)
        self.decoder = StreamDecoder(engine.tokenizer)
        self.finish: str | None = None
        self.steps = 0
        self.draft_length = speculation.draft_tokens  # the adaptive schedule's current length

    # -- records ------------------------------------------------------------------------------------------
    def _top(self, probs: torch.Tensor) -> list[Candidate]:
        values, indices = probs.topk(min(self.top_n, probs.numel()))
        return [
            Candidate(int(i), self.engine.tokenizer.decode([int(i)]), float(v))
            for v, i in zip(values, indices)
            if float(v) > 0
        ]

    def _text(self, token: int) -> str:
        return self.engine.tokenizer.decode([token])

    # -- phases -------------------------------------------------------------------------------------------
    def step(self) -> SpeculativeStep:
        """One forward of the model over the tokens not yet cached (the prompt, then the last token) and a draft."""
        started = time.perf_counter()
        start = self.kv_cache.length
        fed = self.ids[start:]  # the prompt at first, then the token the last step ended with
        budget = min(
            self.draft_length,
            self.params.max_new_tokens - len(self.generated) - 1,  # the step adds its drafts and one more
            self.engine.config.max_seq_len - len(self.ids),  # the cache holds the drafted positions too
        )
        draft = self._draft(fed, budget) if budget > 0 else _Draft([], [], [], [], [])
        draft_seconds = time.perf_counter() - started
        if not draft.tokens:  # nothing to verify (no match, or no room): an ordinary step
            if start == 0:
                logits = self.engine.prefill(fed, self.kv_cache, interventions=self.interventions)
            else:
                logits = self.engine.decode_step(fed[0], self.kv_cache, interventions=self.interventions)
            final = self._plain_token(logits)
            phase = "prefill" if start == 0 else "plain"
            return self._emit(phase, [], final, [final.token_id], started, draft_seconds, draft)
        logits = self._verify(start, fed, draft)  # (T + 1, V): p at each drafted position, then after the last
        checks, final = self._judge(draft, logits)
        kept = [check.token_id for check in checks if check.accepted]
        self.kv_cache.truncate(len(self.ids) + len(kept))  # the fed tokens and the kept drafts; not the rest
        phase = "prefill" if start == 0 else "verify"
        step = self._emit(phase, checks, final, kept + [final.token_id], started, draft_seconds, draft)
        self.draft_length = self.speculation.next_draft_length(self.draft_length, len(draft.tokens), len(kept))
        return step

    def _draft(self, fed: list[int], budget: int) -> _Draft:
        if self.speculation.drafter == "lookup":
            tokens, n, start = lookup_draft(self.ids, self.speculation.ngram, budget)
            return _Draft(tokens, [None] * len(tokens), [None] * len(tokens), [None] * len(tokens), [], n, start)
        return self._self_draft(fed, budget)

    def _self_draft(self, fed: list[int], budget: int) -> _Draft:
        """``budget`` tokens from the first k blocks, one at a time, those blocks writing their K/V in the cache."""
        k, engine, params = self.speculation.layers, self.engine, self.params
        draft = _Draft([], [], [], [], [])
        history, tokens = list(self.ids), fed
        for i in range(budget + 1):  # the last pass only feeds the last draft (the verifier needs its stream)
            stream = engine.run_layers(range(k), self.kv_cache, token_ids=tokens, interventions=self.interventions)
            draft.streams.append(stream)  # (1, len(tokens), D)
            if i == budget:
                break
            q = filtered_probs(engine.head_logits(stream[:, -1:])[0], params, history)  # (V,)
            generator = None if params.greedy else generator_for(params, len(self.generated) + i)
            token, _, u = _draw(q, params, generator)
            draft.tokens.append(token)
            draft.q.append(q)
            draft.generators.append(generator)
            draft.draft_us.append(u)
            history.append(token)
            tokens = [token]
        return draft

    def _verify(self, start: int, fed: list[int], draft: _Draft) -> torch.Tensor:
        """The model's logits (T + 1, V) at the last fed token and each draft: one forward (self-speculation: of
        the blocks after the draft's, on the draft's stream)."""
        n_layers, checked = self.engine.config.n_layers, len(draft.tokens) + 1
        if self.speculation.drafter == "lookup":
            out = self.engine.run_layers(
                range(n_layers), self.kv_cache, token_ids=fed + draft.tokens, interventions=self.interventions
            )  # (1, F + T, D)
        else:
            k = self.speculation.layers
            self.kv_cache.truncate(start)  # blocks >= k write from the first fed position on
            stream = torch.cat(draft.streams, dim=1)  # (1, F + T, D): the draft's stream entering block k
            out = self.engine.run_layers(
                range(k, n_layers), self.kv_cache, stream=stream, interventions=self.interventions
            )  # (1, F + T, D)
        return self.engine.head_logits(out[:, -checked:])  # (T + 1, V)

    def _judge(self, draft: _Draft, logits: torch.Tensor) -> tuple[list[DraftCheck], FinalToken]:
        """Accept or reject each draft in order by the rule (module docstring); the token that ends the step."""
        params, history, checks = self.params, list(self.ids), []
        for i, token in enumerate(draft.tokens):
            position = len(self.generated) + i
            p = filtered_probs(logits[i], params, history)  # (V,)
            q = draft.q[i]
            check = DraftCheck(
                position,
                token,
                self._text(token),
                q=1.0 if q is None else float(q[token]),
                p=float(p[token]),
                accept_probability=0.0,
                u=None,
                accepted=False,
                p_top=self._top(p),
                q_top=self._top(q) if q is not None else [],
                draft_u=draft.draft_us[i],
            )
            checks.append(check)
            if q is None:
                check.q_top = [Candidate(token, check.text, 1.0)]
            replacement = self._decide(check, p, q, draft.generators[i], position)
            if replacement is not None:
                return checks, replacement
            history.append(token)
        # every draft kept: one more token from p after the last one, with its own draw
        p = filtered_probs(logits[len(draft.tokens)], params, history)
        position = len(self.generated) + len(draft.tokens)
        generator = None if params.greedy else generator_for(params, position)
        token, probability, u = _draw(p, params, generator)
        return checks, FinalToken(position, token, self._text(token), "bonus", probability, u, self._top(p))

    def _decide(
        self, check: DraftCheck, p: torch.Tensor, q: torch.Tensor | None, generator, position: int
    ) -> FinalToken | None:
        """Fill in ``check``'s verdict; on a rejection, the replacement token (None when the draft is kept)."""
        token, params = check.token_id, self.params
        if params.greedy:
            check.accepted = int(p.argmax()) == token
            check.accept_probability = 1.0 if check.accepted else 0.0
            if check.accepted:
                return None
            best = int(p.argmax())
            return FinalToken(position, best, self._text(best), "residual", 1.0, None, self._top(p))
        if q is None:  # prompt lookup: q is a point mass, so min(1, p/q) = p(x) and the residual is p without x
            ranges = Ranges.from_probs(p)
            drawn, probability, u = ranges.draw(generator_for(params, position))
            slot = (ranges.token_ids == token).nonzero()
            if len(slot):
                check.p_range = (float(ranges.starts[slot[0, 0]]), float(ranges.ends[slot[0, 0]]))
            check.u, check.accept_probability, check.accepted = u, check.p, drawn == token
            if check.accepted:
                return None
            residual = p.clone()
            residual[token] = 0.0
            mass = float(total(residual))
            residual = residual / mass
            return FinalToken(
                position, drawn, self._text(drawn), "residual", float(residual[drawn]), u, self._top(residual), mass
            )
        check.accept_probability = min(1.0, check.p / check.q)
        check.u = float(torch.rand((), generator=generator))  # the draw's second number (the first picked x)
        check.accepted = check.u < check.accept_probability
        if check.accepted:
            return None
        residual = (p - q).clamp(min=0.0)  # (V,)
        mass = float(total(residual))
        residual = residual / mass if mass > 0 else p  # mass 0 only when p == q, where nothing is rejected
        drawn, probability, u = draw(residual, generator)  # its third
        return FinalToken(position, drawn, self._text(drawn), "residual", probability, u, self._top(residual), mass)

    def _plain_token(self, logits: torch.Tensor) -> FinalToken:
        """The next token from ``logits`` (V,) exactly as plain decoding draws it (draw ``len(generated)``)."""
        p = filtered_probs(logits, self.params, self.ids)
        position = len(self.generated)
        generator = None if self.params.greedy else generator_for(self.params, position)
        token, probability, u = _draw(p, self.params, generator)
        return FinalToken(position, token, self._text(token), "plain", probability, u, self._top(p))

    def _emit(
        self,
        phase: str,
        checks: list[DraftCheck],
        final: FinalToken,
        tokens: list[int],
        started: float,
        draft_seconds: float = 0.0,
        draft: _Draft | None = None,
    ) -> SpeculativeStep:
        """Append the step's tokens one by one, stopping at the first that ends the request (the stop rule)."""
        emitted, text = [], ""
        for token in tokens:
            self.ids.append(token)
            self.generated.append(token)
            emitted.append(token)
            self.finish = finish_reason(
                self.params, self.engine.eos_ids, self.generated, len(self.ids), self.engine.config.max_seq_len
            )
            text += self.decoder.push(token)
            if self.finish is not None:
                text += self.decoder.flush()
                break
        step = SpeculativeStep(
            index=self.steps,
            phase=phase,
            checks=checks,
            final=final,
            token_ids=emitted,
            text=text,
            cache_len=self.kv_cache.length,
            seconds=time.perf_counter() - started,
            draft_seconds=draft_seconds,
            ngram=draft.ngram if draft else None,
            match_start=draft.match_start if draft else None,
            finish_reason=self.finish,
            draft_length=self.draft_length,
        )
        self.steps += 1
        return step


# -- checking greedy output against plain decoding's -----------------------------------------------------------
@dataclass(frozen=True)
class GreedyDifference:
    """Where a greedy speculative output first differs from plain greedy decoding's, with the two tokens' logits
    in one forward over the prompt and the tokens both outputs share (what a verifying forward computes).

    Plain decoding computes each position in a forward of one row; a verifying forward computes several rows
    at once, and its kernels sum in another order (on a CPU, ATen's 4-bit product takes rows four at a time),
    and the quantized products round their outputs to ``dtype``. Where the two best logits are that close,
    either may come out on top, so the outputs part there: a tie at the kernels' rounding, not a fault of the
    rule. Anything wider is a fault. How close (``rounding``), for each of the two logits, doubled:
    - float32 sums in another order: the derived bound of ``model.tolerances.model_tolerance``;
    - products rounded to bfloat16 (the quantized layers): ``PATH_UNITS`` units in the last place of the
      largest logit. This one is measured, not derived (the same formula at bfloat16's roundoff gives a bound
      ~190 logits wide): the worst over three prompts, 41 positions each, the top 20 logits, was 2.0 units on
      SmolLM2's Q4_1 file and 2.5 on Gemma 3's Q4_K_M; ``tests/test_speculative.py`` measures it again on the
      machine it runs on.
    """

    position: int  # the generated token's index
    plain_token: int
    speculative_token: int
    plain_text: str
    speculative_text: str
    plain_logit: float
    speculative_logit: float
    best_logit: float  # the largest logit there
    dtype: str  # what the products round their outputs to
    rounding: float  # how far the two forwards may move a logit, doubled (see above)

    @property
    def gap(self) -> float:
        """|logit(speculative token) - logit(plain token)| in the one forward."""
        return abs(self.speculative_logit - self.plain_logit)

    @property
    def is_tie(self) -> bool:
        """Both tokens' logits within ``rounding`` of the largest: the kernels' rounding can pick either."""
        return max(self.best_logit - self.plain_logit, self.best_logit - self.speculative_logit) <= self.rounding


def last_place(value: float, dtype: torch.dtype) -> float:
    """One unit in the last place of ``value`` in ``dtype``."""
    return torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(abs(value))) if value else torch.finfo(dtype).tiny


def products_dtype(model: torch.nn.Module, dtype: torch.dtype) -> torch.dtype:
    """What the model's matrix products round their outputs to: bfloat16 for the quantized layers, else ``dtype``."""
    from ..model.quant import ACTIVATION_DTYPE, Int4Linear, Int8GroupLinear, Int8Linear

    quantized = any(isinstance(m, (Int4Linear, Int8Linear, Int8GroupLinear)) for m in model.modules())
    return ACTIVATION_DTYPE if quantized else dtype


def compare_greedy(engine, prompt_ids: list[int], plain: list[int], speculative: list[int]) -> GreedyDifference | None:
    """None when the two greedy outputs are the same tokens; else their first difference (``GreedyDifference``).

    ``engine`` is a ``generation.engine.Engine``; ``prompt_ids`` the encoded prompt (chat template included).
    """
    position = next((i for i, (a, b) in enumerate(zip(plain, speculative)) if a != b), None)
    if position is None:
        if len(plain) == len(speculative):
            return None
        raise SpeculationError(f"outputs of {len(plain)} and {len(speculative)} tokens that agree where both have one")
    a, b = plain[position], speculative[position]
    ids = list(prompt_ids) + list(plain[:position])
    logits = engine.prefill(ids, engine.new_cache(len(ids)))  # (V,): the last position's, float32
    dtype = products_dtype(engine.model, engine.dtype)
    best = float(logits.max())
    per_logit = model_tolerance(engine.config, logits, context=len(ids))  # float32 sums in another order
    if dtype == torch.bfloat16:
        per_logit = max(per_logit, PATH_UNITS * last_place(best, dtype))
    decode = engine.tokenizer.decode
    return GreedyDifference(
        position,
        a,
        b,
        decode([a]),
        decode([b]),
        float(logits[a]),
        float(logits[b]),
        best,
        str(dtype).removeprefix("torch."),
        2 * per_logit,
    )


def speculate(
    engine: EngineParts,
    prompt: str | list[int],
    params: SamplingParams | None = None,
    speculation: Speculation | None = None,
    chat: bool = False,
    interventions: Interventions | None = None,
    top_n: int = 5,
) -> Iterator[SpeculativeStep]:
    """Yield one ``SpeculativeStep`` per forward of the model until EOS, max tokens or the context's end.

    The first is the prompt's forward (its token drawn as plain decoding draws it); then each step drafts,
    verifies in one forward, keeps what the rule keeps and cuts the cache back. ``interventions`` apply in
    every forward: the prompt's, the draft's blocks and the verifier's.
    """
    params = params or SamplingParams()
    speculation = speculation or Speculation()
    if not isinstance(speculation, Speculation):
        raise SpeculationError(f"speculation must be a Speculation, got {type(speculation).__name__}")
    if not isinstance(params, SamplingParams):
        raise SpeculationError(f"params must be a SamplingParams, got {type(params).__name__}")
    speculation.check(engine.config.n_layers)
    ids = engine.encode_prompt(prompt, chat=chat)
    spec = engine.prepare_interventions(interventions, ids)
    request = _Request(engine, ids, params, speculation, spec, top_n)
    # draft -> one forward over what is not cached yet and the draft -> accept or reject -> cut the cache back;
    # the first step's forward is the prompt's (it verifies a draft too, when there is one)
    while request.finish is None:
        yield request.step()
