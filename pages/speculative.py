"""Speculative decoding: a cheap draft guesses several tokens, one forward of the model checks them all."""

import dataclasses

import streamlit as st

from inference.api import SpeculationError
from ui.common import charts, models, presenter, state
from ui.common import format as fmt
from ui.common.navigation import redirect_legacy_run
from ui.common.prompt_tail import prompt_tail
from ui.common.resources import current_client
from ui.common.token_text import visible
from ui.sampling import controls as sampling_controls
from ui.speculative import claims
from ui.speculative import compute as spec
from ui.speculative import figures as figs
from ui.tokenization.prompt import prompt_tokens_or_stop

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("Speculative decoding")
st.markdown(
    "Plain decoding runs the whole model once per token. **Speculative decoding** lets a cheap *draft* guess "
    "several tokens, then checks all of them in **one** forward of the model. A drafted token x is kept with "
    "probability min(1, p(x)/q(x)), where p is the model's distribution and q the draft's (both after the "
    "sampling settings); the first one rejected is replaced by a draw from normalize(max(0, p − q)); when every "
    "draft is kept, one more token comes from p. Each token is then distributed exactly as plain decoding's "
    "(Leviathan et al. 2023; Chen et al. 2023). Two drafts, neither a second model: **prompt lookup** copies what "
    "followed the text's last n tokens where they occurred before; **self-speculation** runs only the model's "
    "first k layers, then its final norm and output matrix."
)

model = models.current()
client = current_client()
config = client.info.config
view = prompt_tokens_or_stop()
presenting = presenter.is_on()
settings = sampling_controls.settings_or_stop(config.vocab_size, draw=not presenting)
if presenting:
    st.caption(f"Sampling: {sampling_controls.summary(settings.params)} (presenter mode hides the other controls).")

# 1. The draft's settings (bad values are the engine's to refuse: its message is shown, the settings are kept)
st.header("Draft, then check")
c1, c2, c3, c4 = st.columns([1.6, 1, 1, 1], vertical_alignment="bottom")
drafter = c1.radio(
    "Draft",
    list(spec.DRAFTERS),
    format_func=spec.DRAFTERS.get,
    horizontal=True,
    **state.bind(state.SPEC_DRAFTER, "lookup", list(spec.DRAFTERS)),
)
draft_tokens = c2.number_input(
    f"Most tokens drafted a step (1–{spec.MAX_DRAFT_TOKENS})",
    min_value=1,
    max_value=spec.MAX_DRAFT_TOKENS,
    step=1,
    help="The draft length adapts: two more after a step whose drafts were all kept, one fewer (at least one) "
    "after a rejection, never more than this.",
    **state.bind(state.SPEC_DRAFT_TOKENS, 4, range(1, spec.MAX_DRAFT_TOKENS + 1)),
)
if drafter == "lookup":
    setting = c3.number_input(
        "Longest n-gram matched",
        min_value=0,
        max_value=spec.MAX_NGRAM,
        step=1,
        help="The text's last n tokens are looked for earlier in the text (then n − 1, …, 1).",
        **state.bind(state.SPEC_NGRAM, 3, range(0, spec.MAX_NGRAM + 1)),
    )
else:
    setting = c3.number_input(
        f"Draft depth k (of {config.n_layers} layers)",
        min_value=0,
        max_value=config.n_layers,
        step=1,
        help=f"The draft runs layers 0…k − 1; k must be 1…{config.n_layers - 1}.",
        **state.bind(state.SPEC_DEPTH, config.n_layers // 2, range(0, config.n_layers + 1)),
    )
new_tokens = c4.number_input(
    f"New tokens (≤ {spec.MAX_NEW_TOKENS})",
    min_value=2,
    max_value=spec.MAX_NEW_TOKENS,
    step=1,
    **state.bind(state.SPEC_NEW_TOKENS, spec.DEFAULT_NEW_TOKENS, range(2, spec.MAX_NEW_TOKENS + 1)),
)
ngram = int(st.session_state.get(state.SPEC_NGRAM, 3))
depth = int(st.session_state.get(state.SPEC_DEPTH, config.n_layers // 2))
try:
    speculation = spec.speculation_for(drafter, int(draft_tokens), ngram, depth, config.n_layers)
except SpeculationError as error:
    st.error(f"Cannot speculate with these settings: {fmt.clause(error)}. Nothing was run; your settings are kept.")
    st.stop()
params = dataclasses.replace(settings.params, max_new_tokens=int(new_tokens)).canonical()
tail, part = prompt_tail(list(view.ids), spec.MAX_PROMPT_TOKENS, client.tokenizer.bos_token)
ids = tuple(tail)
if len(ids) < len(view.ids):
    st.warning(
        f"The prompt has {len(view.ids):,} tokens; this page decodes from {part}: each of its whole requests "
        "(plain and speculative, twice each, and the checks below) reads its prompt again."
    )
try:
    with st.spinner("Decoding speculatively and plainly, twice each…"):
        result = spec.run(model, ids, params, speculation)
except spec.ERRORS as error:
    st.error(f"Cannot run this request: {fmt.clause(error)}. Your settings are kept.")
    st.stop()

st.markdown(
    f"**{speculation.describe().capitalize()}**, {sampling_controls.summary(params)}: {fmt.quoted_text(result.text)}."
)
st.markdown(
    claims.steps_sentence(
        len(result.token_ids),
        result.forwards,
        result.drafted,
        result.accepted,
        sum(1 for step in result.steps if step.checks),
    )
)
if drafter == "lookup":
    note = claims.lookup_note(sum(1 for s in result.steps if s.ngram is not None), len(result.steps), ngram)
    if note:
        st.caption(note)
rows, row_names = spec.step_rows(result.steps)
charts.show(figs.step_rows(rows, row_names), key="spec_steps")
st.caption(
    "One row per forward of the model. A row holds the drafts in order as far as they were checked (a draft "
    "after the first rejection is not checked, and is not drawn), then the token the step ends with. Hover a "
    "cell for its p, q, min(1, p/q) and u."
)

# 2. One drafted token, closely
st.header("One drafted token: p against q")
options = spec.focus_options(result.steps)
if not options:
    st.info(
        "Nothing was drafted in this run, so there is no drafted token to look at. Prompt lookup needs a text that "
        "repeats itself; self-speculation always drafts."
    )
else:
    focus = st.selectbox(
        "Token in focus",
        options,
        format_func={
            o: f"step {o[0]}, draft {o[1] + 1}: {visible(result.steps[o[0]].checks[o[1]].text) or '∅'} "
            f"({'kept' if result.steps[o[0]].checks[o[1]].accepted else 'rejected'})"
            for o in options
        }.__getitem__,
        **state.bind(state.SPEC_FOCUS, spec.default_focus(result.steps), options),
    )
    step = result.steps[focus[0]]
    check = step.checks[focus[1]]
    bars = spec.focus_bars(check, drafter)
    left, right = st.columns(2) if not presenting else (st.container(), st.container())
    with left:
        charts.show(
            figs.p_vs_q(
                bars.texts,
                bars.p,
                bars.q,
                bars.drafted,
                f"Draft {visible(check.text) or '∅'}: p (model) and q (draft)",
                ids=bars.ids,
            ),
            key="spec_p_vs_q",
        )
    with right:
        model_top = check.p_top[0][1] if check.p_top else None
        st.markdown(
            claims.focus_sentence(
                drafter,
                params.greedy,
                check.text,
                check.p,
                check.q,
                check.accept_probability,
                check.u,
                check.accepted,
                check.p_range,
                model_top,
            )
        )
        if check.u is not None:
            keep = check.p_range if check.p_range is not None else (0.0, check.accept_probability)
            if drafter == "lookup" and check.p_range is None:
                keep = (0.0, 0.0)
            charts.show(
                figs.acceptance_test(
                    keep[0], keep[1], check.u, check.accepted, "The test: u against the stretch that keeps the draft"
                ),
                key="spec_accept_test",
            )
        if not check.accepted:
            drawn = next((i for i, (t, _, _) in enumerate(step.distribution) if t == step.final_id), None)
            charts.show(
                figs.distribution(
                    [t for _, t, _ in step.distribution],
                    [v for _, _, v in step.distribution],
                    drawn,
                    "What the replacement was drawn from" if not params.greedy else "The model's own choice",
                    ids=[i for i, _, _ in step.distribution],
                ),
                key="spec_residual",
            )
            st.markdown(
                claims.residual_sentence(
                    drafter, params.greedy, check.text, step.final_text, step.final_probability, step.rejected_mass
                )
            )

# 3. Speed, measured in the same call as plain decoding
st.header("Faster? Measured against plain decoding")
m1, m2, m3, m4 = st.columns(4)
m1.metric("Plain (tok/s)", f"{result.plain_tps:.1f}")  # the unit in the label: a projector's column is narrow
m2.metric("Speculative (tok/s)", f"{result.speculative_tps:.1f}")
spread = claims.run_spread(result.plain_seconds, result.speculative_seconds)  # the noise between runs of one kind
m3.metric("Speed-up", claims.speedup_headline(result.speedup, result.tokens_per_forward, spread))  # the verdict too
m4.metric("Tokens per forward", f"{result.tokens_per_forward:.2f}")
st.markdown(
    claims.speed_sentence(
        result.speedup,
        result.acceptance_rate,
        result.tokens_per_forward,
        drafter,
        speculation.layers,
        config.n_layers,
        result.measured_at,
        result.load,
        spread,
    )
)
st.caption(
    f"Whole requests ({len(result.plain_ids)} and {len(result.token_ids)} tokens, the prompt's forward included), "
    "in seconds: plain "
    + ", ".join(f"{s:.3f}" for s in result.plain_seconds)
    + "; speculative "
    + ", ".join(f"{s:.3f}" for s in result.speculative_seconds)
    + ". A time of this machine, now: another program running beside it changes it."
)
for what, seconds in (("plain decoding", result.plain_seconds), ("speculative decoding", result.speculative_seconds)):
    busy = claims.spread_note(what + " (s)", *seconds[:2]) if len(seconds) > 1 else None
    if busy:
        st.caption(busy)

# 4. The sweep: acceptance and tokens per forward against k and n
st.header("Draft depth and n-gram length")
depths = spec.sweep_depths(config.n_layers)
sweep_for = (model, ids, params, int(draft_tokens))
st.button(
    "Measure the sweep",
    key=state.SPEC_SWEEP_RUN,
    **state.sets(state.SPEC_SWEEP_FOR, sweep_for),
    help="A few seconds to a minute on two cores.",
)
if st.session_state.get(state.SPEC_SWEEP_FOR) == sweep_for:
    bar = st.progress(0.0, text="sweeping…")
    try:
        sweep = spec.sweep(model, ids, params, int(draft_tokens), lambda share, text: bar.progress(share, text=text))
    except spec.ERRORS as error:
        sweep = None
        st.error(f"Cannot run the sweep: {fmt.clause(error)}.")
    bar.empty()
    if sweep is not None:
        for name, setting_name, title in (
            ("self", "k", "Self-speculation: the first k layers draft"),
            ("lookup", "n", "Prompt lookup: n-grams up to n"),
        ):
            points = sweep.of(name)
            columns = (
                [p.setting for p in points],
                [p.acceptance_rate for p in points],
                [p.tokens_per_forward for p in points],
                [p.speedup for p in points],
            )
            charts.show(figs.sweep(*columns, setting_name, title), key=f"spec_sweep_{name}")
            st.markdown(claims.sweep_sentence(*columns, setting_name))
        st.caption(
            f"{sweep.new_tokens} new tokens at each point, up to {sweep.draft_tokens} drafted a step, your sampling "
            f"settings; plain decoding timed before and after the sweep ({sweep.plain_tps[0]:.1f} and "
            f"{sweep.plain_tps[1]:.1f} tok/s; the speed-ups are against their mean). Measured at {sweep.measured_at}"
            + (f", load {sweep.load:.1f}" if sweep.load is not None else "")
            + ": a time of this machine, then."
        )
        busy = claims.spread_note("plain decoding before and after (tok/s)", *sweep.plain_tps)
        if busy:
            st.caption(busy)
else:
    st.caption(
        f"Runs self-speculation at k = {', '.join(str(k) for k in depths)} and prompt lookup at n = "
        f"{', '.join(str(n) for n in spec.SWEEP_NGRAMS)}, {spec.SWEEP_TOKENS} new tokens each, on this prompt."
    )

# 5. It changes nothing
st.header("It changes nothing")
if params.greedy:
    greedy = spec.GreedyCheck(result.plain_ids, result.token_ids, result.plain_texts, result.texts)
else:
    with st.spinner("Greedy, plainly and speculatively…"):
        greedy = spec.greedy_check(model, ids, params, speculation)
st.markdown(claims.greedy_sentence(greedy.plain_texts, greedy.speculative_texts, greedy.first_difference))
st.caption(
    "Plain greedy: “"
    + visible("".join(greedy.plain_texts))
    + "”. Speculative greedy: “"
    + visible("".join(greedy.speculative_texts))
    + "”."
)
s1, s2 = st.columns([1, 3], vertical_alignment="bottom")
seeds = s1.number_input(
    f"Seeds ({spec.MIN_SEEDS}–{spec.MAX_SEEDS})",
    min_value=spec.MIN_SEEDS,
    max_value=spec.MAX_SEEDS,
    step=10,
    **state.bind(state.SPEC_SEEDS, spec.DEFAULT_SEEDS, range(spec.MIN_SEEDS, spec.MAX_SEEDS + 1)),
)
seeds_for = (model, ids, dataclasses.replace(params, max_new_tokens=2), speculation, int(seeds))
s1.button(
    "Compare many seeds",
    key=state.SPEC_SEEDS_RUN,
    **state.sets(state.SPEC_SEEDS_FOR, seeds_for),
    disabled=params.greedy,
)
if params.greedy:
    s2.caption("Greedy decoding draws nothing at random: set a temperature above 0 to compare the draws of many seeds.")
elif st.session_state.get(state.SPEC_SEEDS_FOR) == seeds_for:
    bar = st.progress(0.0, text="seeds…")
    try:
        test = spec.seed_test(*seeds_for, lambda share, text: bar.progress(share, text=text))
    except spec.ERRORS as error:
        test = None
        st.error(f"Cannot run the seeds: {fmt.clause(error)}.")
    bar.empty()
    if test is not None:
        cells = spec.top_cells(test)
        charts.show(
            figs.seed_counts(
                [c.label for c in cells],
                [c.plain for c in cells],
                [c.speculative for c in cells],
                "The first two tokens, seed by seed",
            ),
            key="spec_seeds_chart",
        )
        st.markdown(
            claims.seed_sentence(
                drafter,
                test.seeds,
                test.same_seeds,
                test.statistic,
                test.dof,
                test.p_value,
                len(set(test.plain) | set(test.speculative)),
            )
        )
        st.caption(
            f"Speculative decoding ran for real on each seed; plain decoding's draws were replayed from the model's "
            f"logits with each seed's own random numbers (checked against plain decoding itself on "
            f"{test.replay_checked} seeds: {test.replay_matched} matched). {test.seconds:.0f} s on this machine."
        )
else:
    s2.caption(
        "Runs speculative decoding once per seed (0, 1, 2, …) for the first two tokens and compares how often each "
        "pair comes up with plain decoding's, by a χ² test: the same distribution, or not?"
    )
