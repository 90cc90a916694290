"""Two models side by side: the same prompt through both, and where their designs and answers differ."""

import streamlit as st

from inference.api import PromptError, TokenizerError
from ui.common import charts, models, resources, state
from ui.common import format as fmt
from ui.common.conventions import shared_range
from ui.common.navigation import redirect_legacy_run
from ui.compare import claims
from ui.compare import compute as cmp
from ui.generation.figures import alternatives_bar
from ui.tokenization.compute import tokenize
from ui.tokenization.figures import token_chips_html

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

CHIP_LIMIT = 96

st.title("Two models side by side")
st.markdown(
    "Everything the other pages showed for one model holds for any causal language model: text becomes tokens, "
    "tokens become vectors, attention and feed-forward blocks refine them, the last vector becomes scores over a "
    "vocabulary. What changes from model to model is the design inside that story. Here the same prompt (the "
    "sidebar's, as plain text) goes through two models at once."
)

offered = list(models.allowlist())
for name, hint in models.missing().items():
    st.info(f"**{name}** would be offered here but is not installed on this server: {hint}.")
if len(offered) < 2:
    st.warning("This server offers only one model, so there is nothing to set beside it.")
    st.stop()

c1, c2 = st.columns(2)
left_model = c1.selectbox("Left", offered, **state.bind(state.CMP_LEFT, offered[0], options=offered))
right_choices = [name for name in offered if name != left_model]
right_model = c2.selectbox(
    "Right", right_choices, **state.bind(state.CMP_RIGHT, right_choices[0], options=right_choices)
)
pair = (left_model, right_model)
prompt = str(state.get(state.PROMPT) or "")

views = {}
for model in pair:
    resources.client_with_notice(model)  # a spinner naming the model while it loads (here or in another session)
    try:
        views[model] = tokenize(model, prompt, False)
    except (PromptError, TokenizerError) as error:
        st.error(f"Cannot run this prompt on {model}: {fmt.clause(error)}. Edit the prompt in the sidebar.")
        st.stop()

# 1. The two designs
st.header("The two designs")
cards = {model: cmp.model_card(model) for model in pair}


def _design_rows(card: cmp.ModelCard) -> dict[str, str]:
    sharing = f"{card.n_heads} query heads share {fmt.count(card.n_kv_heads, 'K/V head')}"
    return {
        "parameters": f"{card.parameters / 1e6:.1f} M",
        "layers": str(card.n_layers),
        "d_model": str(card.d_model),
        "attention heads": sharing,
        "heads × head_dim": f"{card.n_heads} × {card.head_dim} = {card.n_heads * card.head_dim}",
        "local (sliding-window) layers": (
            f"{card.local_layers} of {card.n_layers}, window {card.window}"
            if card.local_layers
            else "none: every layer is global"
        ),
        "vocabulary": f"{card.vocab_size:,} ({card.tokenizer_scheme} BPE)",
        f"KV cache per token ({cards[pair[0]].dtype})": f"{card.kv_bytes_per_token:,} bytes",
    }


rows = {model: _design_rows(cards[model]) for model in pair}
st.dataframe(
    [
        {"": label, left_model: rows[left_model][label], right_model: rows[right_model][label]}
        for label in rows[left_model]
    ],
    hide_index=True,
    key="cmp_design",
)
a, b = cards[left_model], cards[right_model]
bigger, smaller = (a, b) if a.parameters >= b.parameters else (b, a)
st.markdown(
    f"**{bigger.name}** has {bigger.parameters / smaller.parameters:.1f}× the parameters of **{smaller.name}**; "
    f"its embedding matrix alone is {bigger.vocab_size:,} × {bigger.d_model} = "
    f"{bigger.vocab_size * bigger.d_model / 1e6:.0f} M of them "
    f"({fmt.pct(bigger.vocab_size * bigger.d_model / bigger.parameters)}), against "
    f"{smaller.vocab_size * smaller.d_model / 1e6:.0f} M ({fmt.pct(smaller.vocab_size * smaller.d_model / smaller.parameters)}). "
    f"Per token of context, {a.name}'s KV cache takes {a.kv_bytes_per_token:,} bytes and {b.name}'s "
    f"{b.kv_bytes_per_token:,}."
)

# 2. The two tokenizations
st.header("The same text, two tokenizers")
cols = st.columns(2)
for column, model in zip(cols, pair):
    view = views[model]
    with column:
        st.subheader(model)
        shown = min(len(view.ids), CHIP_LIMIT)
        specials = [piece for piece, special in zip(view.pieces, view.special) if special]
        st.markdown(
            claims.token_count_sentence(
                len(view.ids) - len(specials), view.n_chars, specials, shown if shown < len(view.ids) else None
            )
        )
        st.markdown(
            token_chips_html(view.pieces[:shown], view.ids[:shown], view.special[:shown]), unsafe_allow_html=True
        )
        space = next((raw[0] for raw in view.raw if raw[:1] in ("Ġ", "▁")), None)
        st.caption(f"Stored entries write a space as `{space}`." if space else "No token here starts with a space.")

# 3. The next token
st.header("The next token: each model's top 10")
cols = st.columns(2)
tops = {model: cmp.next_token_top(model, prompt) for model in pair}
axis = shared_range(*(tops[model].probabilities for model in pair))  # one scale: equal bars, equal probabilities
for column, model, side in zip(cols, pair, ("left", "right")):
    top = tops[model]
    with column:
        charts.show(
            alternatives_bar(
                top.token_strings,
                top.probabilities,
                top.token_strings[0],
                f"{model}: next token (softmax at T = 1)",
                axis,
                token_ids=top.token_ids,
                chosen_id=top.token_ids[0],
            ),
            key=f"cmp_top_{side}",
        )
shared = set(tops[left_model].token_strings) & set(tops[right_model].token_strings)
st.markdown(
    claims.first_choice_sentence(
        tops[left_model].token_strings[0],
        tops[left_model].probabilities[0],
        tops[right_model].token_strings[0],
        tops[right_model].probabilities[0],
    )
)
st.caption(
    f"{len(shared)} of the ten candidates (compared as text) appear in both lists. Both charts share one "
    "probability axis, so equal bars mean equal probabilities."
)

# 4. Greedy continuations
st.header(f"Greedy continuations ({cmp.CONTINUATION_TOKENS} tokens)")
runs = {model: cmp.greedy_continuation(model, prompt) for model in pair}
cols = st.columns(2)
for column, model in zip(cols, pair):
    run = runs[model]
    with column:
        st.subheader(model)
        st.code(prompt[-200:] + run.text, language=None, wrap_lines=True)
        speed = f"{run.decode_tok_s:.1f} tok/s" if run.decode_tok_s else "—"
        m1, m2 = st.columns(2)
        m1.metric(
            "Decode speed (measured)",
            speed,
            help="Decode steps after the prefill, per second of forward + "
            "sampling, measured on this server when this continuation was generated.",
        )
        m2.metric("Prefill", f"{run.prefill_ms:.0f} ms")
split = cmp.first_divergence(runs[left_model].text, runs[right_model].text)
st.markdown(claims.divergence_sentence(split.common, left_model, split.left_rest, right_model, split.right_rest))
speeds = {model: runs[model].decode_tok_s for model in pair}
if all(speeds.values()):
    fast, slow = sorted(pair, key=lambda m: -speeds[m])
    st.caption(
        f"{fast} decoded {speeds[fast] / speeds[slow]:.1f}× as many tokens per second as {slow} here. One "
        "short run on a shared server is a rough figure; `python -m inference.bench --model ...` measures "
        "both against transformers in one run."
    )

st.header("What to try next")
st.markdown(
    "- Put an emoji or a rare character in the prompt: which tokenizer spends more tokens on it?\n"
    "- Type a prompt of a few hundred words: the local layers of a sliding-window model stop growing their reach "
    "(see **Attention**), and its KV cache grows more slowly per token (see **Generation & KV cache**).\n"
    "- Switch the sidebar's model and walk any page again: every number there comes from the model you chose."
)
