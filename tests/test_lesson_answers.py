"""Every shipped lesson's answers, computed on both real models; each kind of truth against the engine's own numbers.

A lesson stores no answer, so "it plays on both models" means: every question's answer computes on SmolLM2 and on
Gemma 3 (no word missing from a prompt's tokens, no layer past a model's), and each answer is the engine's own
number (the argmax of its logits, its token count, the KV formula from its config), graded with the file's tolerance.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ui.lesson import answers, files
from ui.lesson.answers import Direction, NextToken, Number
from ui.lesson.format import Limits, check_on_model

pytestmark = pytest.mark.real_model

SMOLLM2, GEMMA = "SmolLM2-135M-Instruct", "gemma-3-270m"


@pytest.mark.parametrize("model", [SMOLLM2, GEMMA])
def test_every_shipped_lesson_plays_on_the_model(both_models, model):
    config = both_models[model].config
    limits = Limits(model, config.n_layers, config.n_heads, config.vocab_size)
    for name in files.names():
        lesson = files.load(name)
        assert check_on_model(lesson, limits) == [], name
        assert answers.check_answers(model, lesson) == [], name


# The three lessons issue 37 names, with the number of steps it asks for.
SHIPPED = {"text-to-next-token": (10, 12), "temperature-and-sampling": (6, 8), "why-inference-is-fast": (6, 8)}
KIND_OF_TRUTH = {"pick": NextToken, "type": NextToken, "estimate": Number, "direction": Direction}


@pytest.mark.parametrize("model", [SMOLLM2, GEMMA])
def test_the_issues_three_lessons_compute_every_answer(both_models, model):
    assert set(SHIPPED) <= set(files.names())
    for name, (fewest, most) in SHIPPED.items():
        lesson = files.load(name)
        assert fewest <= len(lesson.steps) <= most, name
        assert lesson.questions, name
        for step in lesson.questions:
            found = answers.truth(model, lesson, step)
            assert isinstance(found, KIND_OF_TRUTH[step.question.kind]), (name, step.number)
            if isinstance(found, Number):
                assert np.isfinite(found.value) and found.value > 0 and found.tolerance > 0, (name, step.number)
            if isinstance(found, NextToken):  # the model's own favourite is among what the learner sees or types
                assert found.right_id in found.token_ids and 0 <= found.right_id < found.vocab_size, (name, step.number)


def _softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    scaled = logits.astype(np.float64) / temperature
    weights = np.exp(scaled - scaled.max())
    return weights / weights.sum()


@pytest.mark.parametrize("model", [SMOLLM2, GEMMA])
def test_the_sampling_lessons_truths_are_the_engines_own_numbers(both_models, model):
    engine = both_models[model]
    lesson = files.load("temperature-and-sampling")
    steps = {step.number: step for step in lesson.steps}
    prompt = steps[1].state["prompt"]
    logits = engine.recompute_last(engine.encode_prompt(prompt)).numpy()
    # greedy: the argmax; sampled at T = 1: the top token's softmax share
    assert answers.truth(model, lesson, steps[1]).right_id == int(np.argmax(logits))
    top = answers.truth(model, lesson, steps[2])
    assert top.value == pytest.approx(_softmax(logits, 1.0).max(), rel=1e-5)
    # T 1 -> 0.5: the top probability at both temperatures, and it rises (dividing by T < 1 sharpens)
    sharper = answers.truth(model, lesson, steps[3])
    assert sharper.before == pytest.approx(_softmax(logits, 1.0).max(), rel=1e-5)
    assert sharper.after == pytest.approx(_softmax(logits, 0.5).max(), rel=1e-5)
    assert sharper.answer == "rises"
    # top-p 0.8: the fewest most-probable tokens whose probability together reaches 0.8
    kept = answers.truth(model, lesson, steps[4])
    cumulative = np.cumsum(np.sort(_softmax(logits, 1.0))[::-1])
    assert kept.value == int(np.searchsorted(cumulative, 0.8)) + 1
    wider = answers.truth(model, lesson, steps[5])
    assert wider.before == kept.value and wider.after == int(np.searchsorted(cumulative, 0.95)) + 1
    assert wider.answer == "rises"


@pytest.mark.parametrize("model", [SMOLLM2, GEMMA])
def test_the_fast_lessons_cache_numbers_are_the_config_formula(both_models, model):
    engine = both_models[model]
    config = engine.config
    lesson = files.load("why-inference-is-fast")
    per_token = 2 * config.n_layers * config.n_kv_heads * config.head_dim * 4  # K and V, fp32
    lengths = {step.number: step.question.length for step in lesson.questions if step.question.kind == "estimate"}
    assert lengths == {2: 4096, 5: 16}
    for number, length in lengths.items():
        assert answers.truth(model, lesson, lesson.steps[number - 1]).value == per_token * length
    greedy = answers.truth(model, lesson, lesson.steps[0])  # the first decode step after "The cat sat on"
    logits = engine.recompute_last(engine.encode_prompt("The cat sat on")).numpy()
    assert greedy.right_id == int(np.argmax(logits))


@pytest.mark.parametrize("model", [SMOLLM2, GEMMA])
def test_each_truth_is_the_engines_own_number(both_models, model):
    engine = both_models[model]
    lesson = files.load("text-to-next-token")
    steps = {step.number: step for step in lesson.steps}
    # tokens: the engine's own encoding of the prompt
    tokens = answers.truth(model, lesson, steps[1])
    assert isinstance(tokens, Number) and tokens.value == len(engine.encode_prompt("The cat sat"))
    # pick: the argmax of the engine's logits, offered among the shuffled options with the distractors
    pick = answers.truth(model, lesson, steps[5])
    logits = engine.recompute_last(engine.encode_prompt("The cat sat")).numpy()
    assert isinstance(pick, NextToken) and pick.right_id == int(np.argmax(logits))
    assert pick.right_id in pick.options and len(pick.options) >= 4 + 1  # the top 4 and at least one distractor
    assert pick.options != sorted(pick.options, key=lambda i: -logits[i])  # shuffled, not in the model's order
    # probability at T = 1: softmax of the engine's logits
    probability = answers.truth(model, lesson, steps[6])
    expected = np.exp(logits.max() - logits.max()) / np.exp(logits.astype(np.float64) - logits.max()).sum()
    assert probability.value == pytest.approx(float(expected), rel=1e-5)
    # direction: entropy over T = 0.7 -> 1.5 rises on both models (softmax flattens as T grows)
    rise = answers.truth(model, lesson, steps[7])
    assert isinstance(rise, Direction) and rise.answer == "rises" and rise.after > rise.before


@pytest.mark.parametrize("model", [SMOLLM2, GEMMA])
def test_the_kv_bytes_are_the_config_formula(both_models, model):
    config = both_models[model].config
    lesson = files.load("attention-and-the-kv-cache")
    kv = answers.truth(model, lesson, lesson.steps[2])
    assert kv.value == 2 * config.n_layers * config.n_kv_heads * config.head_dim * 4 * 1000  # fp32: 4 bytes
    assert kv.tolerance == pytest.approx(0.5 * kv.value)  # "50%" in the file


def test_grading_with_the_files_tolerance(both_models):
    lesson = files.load("text-to-next-token")
    step = lesson.steps[5]  # probability of the top token, tolerance 0.1
    found = answers.truth(SMOLLM2, lesson, step)
    assert answers.grade(SMOLLM2, step, found, found.value + 0.099).right
    assert not answers.grade(SMOLLM2, step, found, found.value + 0.101).right
    pick_step = lesson.steps[4]
    pick = answers.truth(SMOLLM2, lesson, pick_step)
    assert answers.grade(SMOLLM2, pick_step, pick, pick.right_id).right
    wrong = next(i for i in pick.options if i != pick.right_id)
    assert not answers.grade(SMOLLM2, pick_step, pick, wrong).right
    typed_step = lesson.steps[8]  # "The cat sat on the" -> the model's own favourite, typed
    typed = answers.truth(SMOLLM2, lesson, typed_step)
    assert answers.grade(SMOLLM2, typed_step, typed, typed.texts[0].strip().upper()).right  # case and space aside
    assert not answers.grade(SMOLLM2, typed_step, typed, "xylophone").right


def test_a_question_this_model_cannot_answer_names_its_place(both_models):
    lesson = files.load("attention-and-the-kv-cache")
    step = lesson.steps[0]
    missing = dataclasses.replace(step, question=dataclasses.replace(step.question, key="giraffe"))
    with pytest.raises(answers.LessonError) as raised:
        answers.truth(GEMMA, lesson, missing)
    assert raised.value.lines == ["step 1, question.key: 'giraffe' is not a token of the prompt before 'it'"]


@pytest.mark.parametrize("model", [SMOLLM2, GEMMA])
def test_the_class_votes_beside_the_models_softmax_at_the_steps_temperature(both_models, model):
    from ui.lesson.classmode import class_votes

    engine = both_models[model]
    lesson = files.load("text-to-next-token")
    step = dataclasses.replace(lesson.steps[4], state={"prompt": "The cat sat", "temperature": 0.5})
    votes = class_votes(model, step, ["on", "on", "at", "mat"], 0.5)
    ids = engine.encode_prompt("The cat sat")
    logits = engine.recompute_last(ids).numpy().astype(np.float64) / 0.5
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    voted = [engine.tokenizer.encode(" " + word, special_tokens=False)[0] for word in ("on", "at", "mat")]
    assert votes.class_share[:3] == [0.5, 0.25, 0.25]
    assert votes.model_prob[:3] == pytest.approx([probs[t] for t in voted], rel=1e-5)
    expected = min(0.5, probs[voted[0]]) + min(0.25, probs[voted[1]]) + min(0.25, probs[voted[2]])
    assert votes.overlap == pytest.approx(expected, rel=1e-5)
    assert votes.chose_top == (2 if int(np.argmax(logits)) == voted[0] else 0)
