"""Speculative decoding changes nothing but the number of forwards: greedy output is plain greedy's token for
token, sampled output is distributed as plain decoding's, and bad settings are refused.

Greedy: both drafters, tiny random Llama, GPT-2 and Gemma 3 models (4 layers; Gemma's window of 8 keys
passed on the long prompt) and the real SmolLM2 (and Gemma 3 270M where installed). The verifying
forward runs several positions at once where plain decoding runs one, so its float32 sums are taken in
another order: greedy tokens must agree wherever plain decoding's top two logits are further apart than
twice the derived bound of ``tests.tolerances`` (each of the two logits may move by the bound); at a
nearer tie either token is a correct rounding, and the runs are compared up to there.

Sampling: 2,000 seeds on a tiny model whose logits are scaled up (so the first two tokens' joint
distribution has cells worth counting), at T = 1 and at T = 0.7 with top-p 0.9. The first two tokens
are both drafted and judged by the rule (``max_new_tokens=3``, two drafts in the prompt's forward).
Self-speculation's counts are tested against the exact joint distribution (computed from the model)
and against plain decoding's counts, each by a χ² test at α = 1e-3 (a correct implementation fails one
with probability 1e-3; the seeds are fixed, so a run is repeatable). Plain decoding's draws are replayed
from the same distributions with its own generators (checked against ``generate`` on a few seeds), so
2,000 seeds cost no forwards. A rule that keeps every draft must fail the same test (the test's power).
Prompt lookup's q is a point mass, so its seeded draws are plain decoding's: the tokens must be equal
seed by seed (a draw within float rounding of a range's edge could part them: about 1e-6 per draw).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
import torch

from inference import (
    EdgeCut,
    EngineClient,
    HeadEdit,
    Interventions,
    MLPEdit,
    SamplingParams,
    Speculation,
    SpeculationError,
)
from inference.generation import speculative
from inference.generation.sampling import Ranges, filtered_probs, generator_for
from inference.generation.speculative import lookup_draft
from inference.serving.process import check_plain
from tests.test_batching import greedy, tiny_engine
from tests.tolerances import model_tolerance, top2_margin
from ui.common.stats import GoodnessOfFit, chi_square_gof, homogeneity

FAMILIES = ["llama", "gpt2", "gemma3"]
SHORT = [5, 60, 17]
# A long prompt with repeats (prompt lookup finds matches in it) that passes Gemma's 8-key window.
LONG = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43, 38, 32, 79, 50, 28, 84, 19] * 3 + [3, 14, 15]
DRAFTERS = {"lookup": Speculation("lookup", 4, ngram=3), "self": Speculation("self", 3, layers=2)}


def assert_greedy_matches_plain(engine, prompt, speculation, max_new_tokens, interventions=None, chat=False):
    """Speculative greedy == plain greedy, up to the first near-tie of plain decoding's top two logits."""
    params = greedy(max_new_tokens)
    plain = engine.complete(prompt, params, interventions=interventions, chat=chat)
    run = engine.complete(prompt, params, speculate=speculation, interventions=interventions, chat=chat)
    expected, got = plain.token_ids, run.token_ids
    if got == expected:
        assert run.finish_reason == plain.finish_reason
        assert run.text == plain.text
        return run
    first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    ids = engine.encode_prompt(prompt, chat=chat) + expected[:first]
    logits = engine.forward_logits(ids, interventions)[-1]
    bound = 2 * model_tolerance(engine.config, logits, context=len(ids))
    assert top2_margin(logits) <= bound, (
        f"token {first} differs ({got[first : first + 3]} against {expected[first : first + 3]}) where plain "
        f"decoding's top two logits are {top2_margin(logits):.2e} apart (bound {bound:.2e})"
    )
    return run


@pytest.fixture(scope="module", params=FAMILIES)
def tiny(request):
    return tiny_engine(request.param, n_layers=4)


# -- greedy: the same tokens ---------------------------------------------------------------------------------
@pytest.mark.parametrize("drafter", DRAFTERS)
@pytest.mark.parametrize("prompt", [SHORT, LONG], ids=["short", "long"])
def test_greedy_speculation_is_plain_greedy_on_tiny_models(tiny, drafter, prompt):
    run = assert_greedy_matches_plain(tiny, prompt, DRAFTERS[drafter], max_new_tokens=40)
    assert run.drafted > 0, "nothing was drafted: the test checked plain decoding against itself"
    assert run.forwards < len(run.token_ids) or drafter == "self", run.tokens_per_forward  # lookup copies the repeats


def test_a_draft_that_is_the_model_is_always_kept():
    """Blocks 2 and 3 switched off: the first two blocks are the whole model, so every draft is the model's own
    choice: each one kept, and every forward yields its drafts plus one more token."""
    engine = tiny_engine("llama", n_layers=4)
    with torch.no_grad():
        for block in engine.model.layers[2:]:
            block.attn.out.weight.zero_()
            block.mlp.down.weight.zero_()
    run = assert_greedy_matches_plain(engine, SHORT, Speculation("self", 3, layers=2), max_new_tokens=21)
    assert run.acceptance_rate == 1.0
    assert [len(step.token_ids) for step in run.steps] == [4] * 5 + [1]  # 3 drafts + 1, until the budget's end
    sampled = engine.complete(
        SHORT, SamplingParams(max_new_tokens=21, seed=3), speculate=Speculation("self", 3, layers=2)
    )
    assert sampled.acceptance_rate == 1.0  # p == q up to rounding: min(1, p/q) ~ 1


def test_greedy_speculation_keeps_interventions():
    """Heads off, an MLP scaled, a mean ablation and an edge cut at a generated position: the same tokens as plain
    decoding under the same spec, for both drafters (the draft's blocks and the verifier's apply their edits)."""
    engine = tiny_engine("llama", n_layers=4)
    spec = Interventions(
        heads=(HeadEdit(1, 0), HeadEdit(2, 3, mode="mean")),
        mlps=(MLPEdit(3, 0.5),),
        edges=(EdgeCut(query=len(LONG) + 4, key=2),),
    )
    for speculation in DRAFTERS.values():
        run = assert_greedy_matches_plain(engine, LONG, speculation, max_new_tokens=24, interventions=spec)
        assert run.drafted > 0
    plain = engine.complete(LONG, greedy(24))
    assert engine.complete(LONG, greedy(24), interventions=spec).token_ids != plain.token_ids  # the spec matters


@pytest.mark.parametrize("drafter", DRAFTERS)
def test_stop_rules_cut_a_step_where_plain_decoding_stops(drafter):
    probe = tiny_engine("llama", n_layers=4)
    tokens = probe.complete(LONG, greedy(40)).token_ids
    eos = tokens[6]  # plain decoding stops at its first time (at index 6 or before)
    engine = tiny_engine("llama", eos_ids=(eos,), n_layers=4)
    run = assert_greedy_matches_plain(engine, LONG, DRAFTERS[drafter], max_new_tokens=40)
    assert run.finish_reason == "eos" and run.token_ids[-1] == eos
    run = assert_greedy_matches_plain(probe, LONG, DRAFTERS[drafter], max_new_tokens=13)
    assert run.finish_reason == "length" and len(run.token_ids) == 13
    near_end = (LONG * 5)[: probe.config.max_seq_len - 6]  # 6 positions left in the context
    run = assert_greedy_matches_plain(probe, near_end, DRAFTERS[drafter], max_new_tokens=32)
    assert run.finish_reason == "context" and len(run.token_ids) == 6


# -- the real models -----------------------------------------------------------------------------------------
CODE = """def mean(values):
    total = 0
    for value in values:
        total += value
    return total / len(values)


def mean_of_squares(values):
"""
QUOTE = (  # through the chat template, the model quotes it back: a copy-heavy answer
    'Repeat this sentence exactly, then stop: "The old lighthouse keeper climbed the hundred and twelve steps '
    'every evening to light the lamp, even after the ships stopped coming."'
)
REAL_PROMPTS = {"short": ("The cat sat", False), "code": (CODE, False), "quote-chat": (QUOTE, True)}


@pytest.mark.parametrize(
    "prompt, drafter",
    [("short", "lookup"), ("code", "lookup"), ("quote-chat", "lookup"), ("short", "self:15"), ("code", "self:15")],
)
def test_greedy_speculation_is_plain_greedy_on_smollm2(engine, prompt, drafter):
    text, chat = REAL_PROMPTS[prompt]
    run = assert_greedy_matches_plain(engine, text, Speculation.parse(drafter), max_new_tokens=24, chat=chat)
    assert run.drafted > 0
    if prompt == "quote-chat":
        assert run.tokens_per_forward > 1.5, run.tokens_per_forward  # the quoted sentence is drafted and kept


@pytest.mark.parametrize("drafter", ["lookup", "self:9"])
def test_greedy_speculation_is_plain_greedy_on_gemma(gemma_engine, drafter):
    assert_greedy_matches_plain(gemma_engine, CODE, Speculation.parse(drafter), max_new_tokens=16)


# -- sampling: the same distribution ----------------------------------------------------------------------
SEEDS = 2000
ALPHA = 1e-3
SETTINGS = {
    "T=1": SamplingParams(max_new_tokens=3),
    "T=0.7 top-p 0.9": SamplingParams(0.7, top_p=0.9, max_new_tokens=3),
}
CHI_PROMPT = [5, 60, 17, 33, 5, 60]  # ends in "5 60", seen before: prompt lookup drafts "17 33" in the prompt's forward
LOGIT_GAIN = 6.0  # the tiny model's logits are ~0.3 wide; scaled, a few tokens hold most of the mass


@pytest.fixture(scope="module")
def sharp():
    engine = tiny_engine("llama", n_layers=4)
    with torch.no_grad():
        engine.model.lm_head.weight.mul_(LOGIT_GAIN)
    return engine


class PlainDecoding:
    """Plain decoding's first two tokens on ``CHI_PROMPT``: the model's filtered distributions, computed once (the
    second for each first token as it is needed), and each seed's two draws on them exactly as ``sample`` makes
    them (draw i from ``generator_for(params, i)``): 2,000 seeds without 4,000 forwards."""

    def __init__(self, engine, params: SamplingParams) -> None:
        self.engine, self.params = engine, params
        self.first = filtered_probs(engine.recompute_last(CHI_PROMPT), params, CHI_PROMPT)  # (V,)
        self._second: dict[int, torch.Tensor] = {}

    def second(self, t0: int) -> torch.Tensor:
        if t0 not in self._second:
            ids = CHI_PROMPT + [t0]
            self._second[t0] = filtered_probs(self.engine.recompute_last(ids), self.params, ids)  # (V,)
        return self._second[t0]

    def tokens(self, seed: int) -> tuple[int, int]:
        params = replace(self.params, seed=seed)
        t0 = Ranges.from_probs(self.first).draw(generator_for(params, 0))[0]
        return t0, Ranges.from_probs(self.second(t0)).draw(generator_for(params, 1))[0]

    def joint(self) -> dict[tuple[int, int], float]:
        """P(first token, second token), exactly."""
        return {
            (t0, t1): float(self.first[t0] * self.second(t0)[t1])
            for t0 in self.first.nonzero().flatten().tolist()
            for t1 in self.second(t0).nonzero().flatten().tolist()
        }


def goodness_of_fit(counts: Counter, probabilities: dict, n: int) -> GoodnessOfFit:
    """``counts`` of ``n`` runs against the exact ``probabilities`` of each cell (the app's one χ², its pooling)."""
    cells = list(probabilities)
    observed = [counts[c] for c in cells] + [n - sum(counts[c] for c in cells)]  # a cell off the joint: impossible
    return chi_square_gof(np.array(observed), np.array([probabilities[c] for c in cells] + [0.0]))


def first_two(engine, params: SamplingParams, speculation: Speculation, seeds: int = SEEDS) -> list[tuple[int, int]]:
    """The first two tokens of each seed's speculative run (both drafted in the prompt's forward and judged)."""
    return [
        tuple(engine.complete(CHI_PROMPT, replace(params, seed=seed), speculate=speculation).token_ids[:2])
        for seed in range(seeds)
    ]


@pytest.fixture(scope="module", params=SETTINGS)
def plain(request, sharp):
    plain = PlainDecoding(sharp, SETTINGS[request.param])
    for seed in range(5):  # the replay is plain decoding itself
        assert list(plain.tokens(seed)) == sharp.complete(CHI_PROMPT, replace(plain.params, seed=seed)).token_ids[:2]
    return plain


def test_self_speculation_samples_the_models_distribution(sharp, plain):
    speculation = Speculation("self", 2, layers=1)
    drafted = Counter(first_two(sharp, plain.params, speculation))
    fit = goodness_of_fit(drafted, plain.joint(), SEEDS)
    assert fit.dof >= 8, f"only {fit.dof + 1} cells: the test would be weak"
    assert fit.p_value > ALPHA, f"χ² = {fit.statistic:.1f} on {fit.dof} degrees of freedom against the exact joint"
    same = homogeneity(drafted, Counter(plain.tokens(seed) for seed in range(SEEDS)))
    assert same.p_value > ALPHA, f"χ² = {same.statistic:.1f} on {same.dof} degrees of freedom against plain decoding"
    # both branches of the rule ran: drafts kept and drafts replaced by the residual
    run = sharp.complete(CHI_PROMPT, replace(plain.params, max_new_tokens=60, seed=1), speculate=speculation)
    kinds = Counter(step.final.kind for step in run.steps)
    assert run.accepted > 0 and kinds["residual"] > 0, kinds


def test_a_rule_that_keeps_every_draft_fails_the_same_test(sharp, monkeypatch):
    """The χ² test's power: keeping every draft samples the draft's distribution, which it must tell apart
    (with a quarter of the seeds)."""

    def keep(self, check, p, q, generator, position):
        check.accepted, check.accept_probability = True, 1.0

    monkeypatch.setattr(speculative._Request, "_decide", keep)
    plain = PlainDecoding(sharp, SETTINGS["T=1"])
    counts = Counter(first_two(sharp, plain.params, Speculation("self", 2, layers=1), SEEDS // 4))
    fit = goodness_of_fit(counts, plain.joint(), SEEDS // 4)
    assert fit.p_value < ALPHA, f"χ² = {fit.statistic:.1f} on {fit.dof}: the test cannot see a wrong rule"


def test_seeded_prompt_lookup_draws_plain_decodings_tokens(sharp, plain):
    speculation = Speculation("lookup", 2, ngram=2)
    first = sharp.complete(CHI_PROMPT, plain.params, speculate=speculation).steps[0]
    assert [c.token_id for c in first.checks][:1] == [17], "the prompt's forward must check the drafted '17 33'"
    drafted = first_two(sharp, plain.params, speculation)
    differ = [seed for seed, tokens in enumerate(drafted) if tokens != plain.tokens(seed)]
    assert not differ, f"seeds {differ[:5]} drew other tokens than plain decoding"


def test_the_records_say_what_the_rule_did(sharp):
    params = SamplingParams(max_new_tokens=40, seed=7)
    for speculation in (Speculation("self", 3, layers=2), Speculation("lookup", 3)):
        run = sharp.complete(LONG, params, speculate=speculation)
        for step in run.steps:
            kept = [c.accepted for c in step.checks]
            assert kept == sorted(kept, reverse=True) and kept.count(False) <= 1  # kept ones, then one rejected
            assert (
                step.token_ids
                == ([c.token_id for c in step.checks if c.accepted] + [step.final.token_id])[: len(step.token_ids)]
            )
            assert step.final.kind == ("residual" if False in kept else "bonus" if step.checks else "plain")
            for check in step.checks:
                assert check.accept_probability == pytest.approx(min(1.0, check.p / check.q))
                if speculation.drafter == "self":
                    assert check.accepted == (check.u < check.accept_probability)
                elif check.p_range is None:  # the stages filtered the draft out: p(x) = 0
                    assert check.p == 0 and not check.accepted
                else:
                    start, end = check.p_range
                    assert end - start == pytest.approx(check.p, abs=1e-6)
                    assert check.accepted == (start <= check.u < end)
            if step.final.kind == "residual":
                assert 0 < step.final.rejected_mass <= 1
                assert sum(c.probability for c in step.final.distribution) <= 1 + 1e-6
        assert run.tokens_per_forward == len(run.token_ids) / len(run.steps)
        assert 0 <= run.acceptance_rate <= 1


# -- the client seam, and bad input ----------------------------------------------------------------------------
def test_the_client_returns_plain_records():
    client = EngineClient(tiny_engine("llama", n_layers=4))
    run = client.complete(LONG, greedy(12), speculation=Speculation("lookup"))
    check_plain(run, "a speculative run")
    assert len(run.token_ids) == 12 and run.steps[0].phase == "prefill"


def test_lookup_takes_the_latest_longest_match():
    assert lookup_draft([1, 2, 3, 1, 2], 3, 4) == ([3, 1, 2], 2, 0)
    assert lookup_draft([1, 2, 9, 1, 2, 7, 1, 2], 3, 2) == ([7, 1], 2, 3)
    assert lookup_draft([4, 1, 2, 3, 8, 1, 2, 3], 3, 2) == ([8, 1], 3, 1)
    assert lookup_draft([1, 2, 3], 3, 4) == ([], None, None)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Speculation("draft"), "drafter must be one of lookup, self"),
        (lambda: Speculation("lookup", 0), "draft_tokens must be a whole number in 1..16"),
        (lambda: Speculation("lookup", 17), "draft_tokens must be a whole number in 1..16"),
        (lambda: Speculation("lookup", True), "draft_tokens must be a whole number"),
        (lambda: Speculation("lookup", ngram=0), "n-gram length must be a whole number >= 1"),
        (lambda: Speculation("self"), "self-speculation needs its draft depth"),
        (lambda: Speculation("self", layers=0), "self-speculation needs its draft depth"),
        (lambda: Speculation.parse("self"), "self:k"),
        (lambda: Speculation.parse("self:two"), "'two' in 'self:two' is not a whole number"),
        (lambda: Speculation.parse("lookup:0"), "n-gram length must be a whole number >= 1"),
        (lambda: Speculation.parse("medusa"), "speculate as lookup, lookup:n or self:k"),
    ],
)
def test_bad_settings_are_refused(make, message):
    with pytest.raises(SpeculationError, match=message):
        make()


def test_bad_requests_are_refused():
    engine = tiny_engine("llama", n_layers=4)
    with pytest.raises(SpeculationError, match=r"choose 1\.\.3 layers, got 4"):
        engine.complete(SHORT, greedy(4), speculate=Speculation("self", layers=4))
    with pytest.raises(SpeculationError, match="speculation must be a Speculation"):
        list(engine.speculate(SHORT, greedy(4), "lookup"))
    with pytest.raises(SpeculationError, match="params must be a SamplingParams"):
        list(engine.speculate(SHORT, {"temperature": 0}, Speculation()))


# -- the adaptive draft length ----------------------------------------------------------------------------
def test_the_draft_length_follows_what_is_kept():
    spec = Speculation("lookup", 6)
    assert spec.adaptive and Speculation.parse("lookup").adaptive
    assert spec.next_draft_length(6, 6, 6) == 6  # all kept, at the most already
    assert spec.next_draft_length(3, 3, 3) == 5  # all kept: two more
    assert spec.next_draft_length(5, 5, 2) == 4  # a rejection: one fewer
    assert spec.next_draft_length(1, 1, 0) == 1  # never below one
    assert spec.next_draft_length(4, 0, 0) == 4  # nothing drafted (no match): unchanged
    fixed = Speculation.parse("lookup:2:fixed", 5)
    assert (fixed.adaptive, fixed.ngram, fixed.draft_tokens) == (False, 2, 5)
    assert fixed.next_draft_length(5, 5, 0) == 5
    assert not Speculation.parse("self:3:fixed").adaptive and Speculation.parse("self:3").layers == 3
    with pytest.raises(SpeculationError, match="adaptive must be True or False"):
        Speculation("lookup", adaptive="yes")


def test_each_step_drafts_what_the_schedule_asked():
    engine = tiny_engine("llama", n_layers=4)
    for speculation in (
        Speculation("lookup", 6),
        Speculation("self", 6, layers=1),
        Speculation("lookup", 6, adaptive=False),
    ):
        steps = list(engine.speculate(LONG, greedy(40), speculation))
        length = speculation.draft_tokens
        for step in steps:
            assert step.draft_length == length
            assert step.drafted <= length
            length = speculation.next_draft_length(length, step.drafted, step.accepted)
        if speculation.adaptive and any(s.accepted < s.drafted for s in steps):
            assert min(s.draft_length for s in steps) < speculation.draft_tokens
        if not speculation.adaptive:
            assert {s.draft_length for s in steps} == {6}


# -- greedy on quantized products: where the outputs part, a tie at the kernels' rounding ------------------
def _worst_units(engine, prompt: str, steps: int) -> float:
    """The largest move of a top-20 logit between one-row decode steps and one forward of the whole sequence,
    in units in the last place (bfloat16) of the step's largest logit."""
    ids = engine.encode_prompt(prompt)
    cache = engine.new_cache(len(ids) + steps)
    one_row = [engine.prefill(ids, cache)]  # (V,) each
    for _ in range(steps):
        one_row.append(engine.decode_step(int(one_row[-1].argmax()), cache))
    tokens = [int(logits.argmax()) for logits in one_row[:-1]]
    many_rows = engine.forward_logits(ids + tokens)  # (T, V)
    worst = 0.0
    for j, logits in enumerate(one_row):
        top = logits.topk(20).indices
        moved = float((many_rows[len(ids) - 1 + j][top] - logits[top]).abs().max())
        worst = max(worst, moved / speculative.last_place(float(logits.abs().max()), torch.bfloat16))
    return worst


@pytest.mark.parametrize("model", ["smollm2", "gemma"])
def test_quantized_logits_move_less_than_the_allowance_between_forward_shapes(model, request):
    engine = request.getfixturevalue("gguf_engine" if model == "smollm2" else "gemma_gguf_engine")
    assert speculative.products_dtype(engine.model, engine.dtype) == torch.bfloat16
    for prompt in ("The cat sat on the mat because", "x = [1, 2, 3]\nfor i in x:\n"):
        assert _worst_units(engine, prompt, 24) <= speculative.PATH_UNITS, prompt


def test_where_quantized_greedy_outputs_part_it_is_a_tie(gguf_engine):
    params = greedy(40, stop_on_eos=False)
    for text in ("The cat sat", CODE):
        ids = gguf_engine.encode_prompt(text)
        plain = gguf_engine.complete(text, params).token_ids
        for speculation in (Speculation("lookup", 4, adaptive=False), Speculation("lookup", 4)):
            run = gguf_engine.complete(text, params, speculate=speculation).token_ids
            difference = speculative.compare_greedy(gguf_engine, ids, plain, run)
            assert difference is None or difference.is_tie, difference


def test_a_difference_that_is_no_tie_is_named():
    engine = tiny_engine("llama", n_layers=4)
    plain = engine.complete(SHORT, greedy(6)).token_ids
    assert speculative.compare_greedy(engine, SHORT, plain, plain) is None
    logits = engine.forward_logits(SHORT + plain[:2])[-1]
    worst = int(logits.argmin())
    difference = speculative.compare_greedy(engine, SHORT, plain, plain[:2] + [worst] + plain[3:])
    assert (difference.position, difference.plain_token, difference.speculative_token) == (2, plain[2], worst)
    assert difference.dtype == "float32" and not difference.is_tie
    assert difference.gap == pytest.approx(float(logits[plain[2]] - logits[worst]), abs=1e-4)
    with pytest.raises(SpeculationError, match="agree where both have one"):
        speculative.compare_greedy(engine, SHORT, plain, plain[:3])
