"""An interactive generation session: step, run, rewind and branch, reusing the KV cache.

Owns ``Stepper``, the engine-side state of one user's walk through generation: the
prompt, the tokens chosen so far (sampled or forced), the request's ``KVCache`` and the
logits for the next position. Rewinding to step s truncates the cache to the prompt
plus s tokens and recomputes only the last of them, so a branch re-uses everything
before it. The draw at step i is draw i of the request's seeded stream (``generator_for``,
as in every runner), so replaying a rewound step gives the same token again. An
``interventions`` spec, if given, stays on for every forward of the walk (and so for every
K/V it writes).

When a walk ends is ``finish_reason``, the rule every runner uses, with the walk's step
budget (``max_steps``) as its token budget: an end-of-text token ends it when the settings stop
on one (``stop_on_eos``, the default), whether the sampler drew it or the learner forced it;
``stop_on_eos=False`` walks on past it, so a learner can see what a model writes after its own
end. The budget, or the model's context, ends it too. An ended walk refuses another step, forced
or not, with the reason; rewinding opens it again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import torch

from ..model.interventions import Interventions
from ..model.kv_cache import KVCache
from .engine import Candidate, Engine
from .sampling import SampleResult, SamplingParams, finish_reason, generator_for, sample


class StepperError(ValueError):
    """A step, rewind or forced token that cannot be done (message says why)."""


@dataclass
class ChosenToken:
    index: int  # 0 = first token after the prompt
    token_id: int
    text: str
    forced: bool
    probability: float  # the model's softmax (T = 1) probability of this token
    top: list[Candidate]  # the alternatives the model offered at this step
    seconds: float  # forward (prefill or one decode step) + sampling
    phase: str  # "prefill" or "decode": how the logits for this step were produced
    cache_len_before: int  # positions reused from the cache by the forward of this step
    cache_len_after: int
    sample: SampleResult | None = field(default=None, repr=False)


class Stepper:
    def __init__(
        self,
        engine: Engine,
        prompt_ids: list[int],
        params: SamplingParams,
        max_steps: int = 128,
        interventions: Interventions | None = None,
    ) -> None:
        if max_steps < 1:
            raise StepperError("max_steps must be at least 1")
        self.engine = engine
        self.prompt_ids = list(prompt_ids)
        self.params = params
        self.interventions = engine.prepare_interventions(interventions, self.prompt_ids)
        self.budget = max_steps  # the walk's token budget; the context may end it earlier
        self.max_steps = min(max_steps, engine.config.max_seq_len - len(prompt_ids))
        if self.max_steps < 1:
            raise StepperError("the prompt already fills the model's context")
        self.cache: KVCache = engine.new_cache(len(prompt_ids) + self.max_steps)
        self.chosen: list[ChosenToken] = []
        self._logits: torch.Tensor | None = None  # (V,) for the next position
        self._logits_phase = "prefill"
        self._logits_seconds = 0.0
        self._cache_before = 0

    @property
    def cache_length(self) -> int:
        """Positions the walk's KV cache holds now."""
        return len(self.cache)

    @property
    def ids(self) -> list[int]:
        """Prompt + chosen tokens."""
        return self.prompt_ids + [c.token_id for c in self.chosen]

    @property
    def finish_reason(self) -> str | None:
        """Why the walk has ended ("eos", "length" or "context"), or None while it goes on (see the module docstring)."""
        if not self.chosen:
            return None
        rule = replace(self.params, max_new_tokens=self.budget)  # the walk's budget, whatever the settings say
        return finish_reason(
            rule, self.engine.eos_ids, [c.token_id for c in self.chosen], len(self.ids), self.engine.config.max_seq_len
        )

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    def next_logits(self) -> torch.Tensor:
        """Logits (V,) for the next position, computing them through the cache if needed."""
        if self._logits is None:
            self._cache_before = len(self.cache)
            started = time.perf_counter()
            if len(self.cache) == 0:
                self._logits = self.engine.prefill(self.prompt_ids, self.cache, interventions=self.interventions)
                self._logits_phase = "prefill"
            else:
                self._logits = self.engine.decode_step(self.ids[-1], self.cache, interventions=self.interventions)
                self._logits_phase = "decode"
            self._logits_seconds = time.perf_counter() - started
        return self._logits

    def step(self, forced_token: int | None = None) -> ChosenToken:
        """Choose the next token (sampled, or ``forced_token``) and feed it to the model."""
        if self.done:
            raise StepperError("generation has finished (end of text or step limit): rewind to continue")
        logits = self.next_logits()
        started = time.perf_counter()
        index = len(self.chosen)
        result = None
        if forced_token is None:
            result = sample(logits, self.params, generator_for(self.params, index), previous_ids=self.ids, record=True)
            token = result.token_id
        else:
            if not 0 <= forced_token < self.engine.config.vocab_size:
                raise StepperError(f"token id {forced_token} is outside the vocabulary")
            token = forced_token
        probs = logits.softmax(-1)
        top = self.engine.top_candidates(logits, 5)
        seconds = self._logits_seconds + time.perf_counter() - started
        chosen = ChosenToken(
            index=index,
            token_id=token,
            text=self.engine.tokenizer.decode([token]),
            forced=forced_token is not None,
            probability=float(probs[token]),
            top=top,
            seconds=seconds,
            phase=self._logits_phase,
            cache_len_before=self._cache_before,
            cache_len_after=len(self.cache),
            sample=result,
        )
        self.chosen.append(chosen)
        self._logits = None
        return chosen

    def rewind(self, steps_kept: int) -> None:
        """Keep the first ``steps_kept`` chosen tokens; the cache keeps their positions."""
        if steps_kept < 0:
            raise StepperError("cannot rewind past the prompt: the earliest point is step 0 (the prompt alone)")
        if steps_kept > len(self.chosen):
            raise StepperError(f"cannot rewind forward: only {len(self.chosen)} steps exist")
        if steps_kept == len(self.chosen):
            return
        self.chosen = self.chosen[:steps_kept]
        # The cache holds every fed token; the last chosen token is fed on the next step.
        keep = len(self.prompt_ids) + steps_kept - 1 if steps_kept else 0
        self.cache.truncate(keep)
        self._logits = None

    @property
    def text(self) -> str:
        return self.engine.tokenizer.decode([c.token_id for c in self.chosen])
