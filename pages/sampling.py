"""Sampling: cumulative ranges and a seeded u, a thousand draws vs the probabilities, continuations compared."""

import dataclasses

import streamlit as st

from inference.api import BusyError, PromptError
from ui.class_page import broadcast, rounds
from ui.common import charts, example_prompt, navigation, state
from ui.common import format as fmt
from ui.common.navigation import redirect_legacy_run
from ui.common.token_text import visible_token
from ui.sampling import claims, controls
from ui.sampling import figures as figs
from ui.sampling.compute import continuations, draw, draw_history, draw_many, first_divergence
from ui.sampling.figures import toy_ranges
from ui.sampling.prompt import prompt_logits_and_settings

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

TOY_PROBS = [0.1, 0.2, 0.7]  # a small made-up distribution: the ranges before the real vocabulary
N_TOKENS = 10


st.title("Sampling")
st.caption(
    "Lay the surviving tokens end to end on [0, 1), draw one random number u from the seeded generator, "
    "and take the token whose range holds u. Bigger probability, bigger range, more likely to be hit."
)
example_prompt.render("sampling")
prompt, chat, cached, model, settings = prompt_logits_and_settings()
params, key = settings.params, settings.params.canonical()


def _show_pair(runs, labels: list[str], split: int | None, title: str, key: str) -> None:
    """Two continuations as token strips (first difference marked), with their table for download."""
    strings = [run.token_strings for run in runs]
    probabilities = [run.probabilities for run in runs]
    token_ids = [run.token_ids for run in runs]
    charts.show(
        figs.token_strips(strings, labels, probabilities, split, title, token_ids=token_ids), key=key, shared=True
    )


# 1. One draw: the engine's ranges, its u and its choice
st.subheader("1 · One draw, by cumulative ranges")
buttons = st.container(horizontal=True)  # each button as wide as its label, at any text size
buttons.button("Draw again", key=state.DRAW_AGAIN, on_click=controls.step_draw, args=(1,), type="primary")
buttons.button("Start over", key=state.DRAW_RESET, on_click=controls.step_draw, args=(None,))
index = st.session_state.setdefault(state.DRAW_INDEX, 0)
one = draw(model, prompt, chat, key, index)
if one.greedy:
    st.markdown(
        f"T = 0: no u is drawn. The highest-probability token {fmt.bold_token(one.token_string)} "
        "owns the whole range, every draw."
    )
else:
    decimals = fmt.interval_digits(one.chosen_start, one.chosen_end, one.u)  # the range's width shows
    st.markdown(
        f"Draw **#{index}** with seed **{params.seed}**: u = **{one.u:.{decimals}f}** lands in "
        f"{fmt.interval(one.chosen_start, one.chosen_end, decimals)}, the range of {fmt.bold_token(one.token_string)} "
        f"(probability {fmt.prob(one.probability, 4)}, rank {one.chosen_rank + 1} of the {one.survivors:,} "
        "tokens that can be drawn)."
    )
    if index:
        history = " | ".join(f"#{n} {visible_token(text)}" for n, text in draw_history(model, prompt, chat, key, index))
        st.caption(f"Draws so far: {history}")
toy_starts, toy_ends = toy_ranges(TOY_PROBS)
toy_u = one.u if one.u is not None else 0.5
toy_hit = next(i for i, end in enumerate(toy_ends) if toy_u < end or i == len(toy_ends) - 1)
toy_labels = ["token 0", "token 1", "token 2"]
charts.show(
    figs.cumulative_ranges(
        toy_labels,
        toy_starts,
        toy_ends,
        toy_u,
        toy_hit,
        f"A small made-up example first: probabilities {TOY_PROBS} (not the model) · "
        + ("an example u = 0.5 (greedy draws none)" if one.u is None else "the same u"),
        token_labels=False,
    ),
    key="toy_ranges",
    shared=True,
)
shown_hit = one.chosen_rank if one.chosen_rank < len(one.range_ids) else None
rest = one.survivors - len(one.range_ids)
other = f"{rest:,} other tokens" if rest else None
charts.show(
    figs.cumulative_ranges(
        one.range_strings,
        one.range_starts.tolist(),
        one.range_ends.tolist(),
        one.u,
        shown_hit,
        f"The real model: next token after “…{visible_token(cached.token_strings[-1])}”, most probable first",
        other_label=other,
    ),
    key="real_ranges",
    shared=True,
)
st.caption(
    "The real ranges, u and choice are the values the engine's `sample(record=True)` returned. "
    "Draw #k's u comes from its own generator, seeded from (seed, k) as a generation seeds its k-th token, "
    "so the same seed gives the same draws after every rerun."
)

# 2. A thousand draws against the exact probabilities
st.subheader("2 · Draw 1,000 times")
st.button("Draw 1,000 times", key=state.DRAW_1000, on_click=state.put, args=(state.SHOW_HISTOGRAM, True))
if st.session_state.get(state.SHOW_HISTOGRAM):
    many = draw_many(model, prompt, chat, key, 1000)
    gof = many.gof
    charts.show(figs.histogram_chart(many), key="draw_histogram", shared=True)
    st.markdown(claims.histogram_sentence(gof.n_bins, gof.statistic, gof.dof, gof.p_value))

# 2b. The class's draws, pooled (a class server with a teacher key; see pages/class.py)
if broadcast.teacher_key() is not None:
    st.subheader("2b · Draw for the class")
    rounds.teacher_controls(kinds=("draw",))
    rounds.draw_panel()
    st.page_link(
        navigation.script_of("class"),
        label="The class view (draws and guesses, for the projector)",
        icon=":material/groups:",
    )

# 3. Greedy vs sampled, and two temperatures, from the shared server (batched with other sessions)
st.subheader("3 · Continuations side by side")
pair = st.columns(4)
t_a = pair[0].number_input("Setting A: temperature", 0.0, 5.0, step=0.1, **state.bind(state.COMPARE_T_A, 0.3))
t_b = pair[1].number_input("Setting B: temperature", 0.0, 5.0, step=0.1, **state.bind(state.COMPARE_T_B, 1.5))
settings = [dataclasses.replace(params, temperature=t) for t in (0.0, params.temperature, t_a, t_b)]
try:  # all four submitted together: they share the server's forwards
    greedy_run, sampled_run, run_a, run_b = continuations(
        model, prompt, chat, [p.canonical() for p in settings], N_TOKENS
    )
except (BusyError, PromptError) as error:
    st.warning(f"Continuations are not available right now: {fmt.clause(error)}.")
    st.stop()


split = first_divergence(greedy_run.token_ids, sampled_run.token_ids)
longest = max(len(greedy_run.token_ids), len(sampled_run.token_ids))
_show_pair(
    (greedy_run, sampled_run),
    ["greedy (T = 0)", f"sampled (T = {params.temperature:g})"],
    split,
    f"Greedy vs sampled, up to {longest} tokens each (seed {params.seed})",
    key="greedy_vs_sampled",
)
st.markdown(
    f"**Greedy:** {fmt.quoted_text(greedy_run.text)}  \n**Sampled:** {fmt.quoted_text(sampled_run.text)}  \n"
    + claims.greedy_vs_sampled_sentence(params.temperature, split is None)
)
split_ab = first_divergence(run_a.token_ids, run_b.token_ids)
_show_pair(
    (run_a, run_b),
    [f"A: T = {t_a:g}", f"B: T = {t_b:g}"],
    split_ab,
    f"Same prompt, same seed ({params.seed}), two temperatures",
    key="two_settings",
)
st.markdown(
    f"**A:** {fmt.quoted_text(run_a.text)}  \n**B:** {fmt.quoted_text(run_b.text)}  \n"
    + claims.two_settings_sentence(t_a, t_b, split_ab)
)
batch = max(run.max_batch_size or 1 for run in (greedy_run, sampled_run, run_a, run_b))
st.caption(
    f"Generated by the shared engine, which batches every session's requests: these ran in forwards of up "
    f"to {batch} requests (this page sends its four together; more means other sessions' requests joined)."
)

st.header("What to try next")
st.markdown("\n".join(claims.sampling_suggestions(params.temperature)))
