"""Embeddings: each token id selects one row of the embedding matrix; position is added by RoPE."""

import numpy as np
import streamlit as st

from ui.attention import compute as att
from ui.attention import reference as ref
from ui.common import charts, models, state
from ui.common.navigation import redirect_legacy_run
from ui.common.token_text import visible
from ui.embeddings import claims
from ui.embeddings import compute as emb
from ui.embeddings import figures as figs
from ui.tokenization.own_text import own_mask
from ui.tokenization.own_text import words as own_words
from ui.tokenization.prompt import prompt_tokens_or_stop

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

HEATMAP_LIMIT = 64  # tokens in the rows heatmap and the token picker
ROPE_POSITIONS = 12  # positions drawn as arrows

st.title("Embeddings")
model = models.current()
cat_dog, cat_banana = emb.word_cosines(model, " cat", (" dog", " banana"))
st.markdown(
    "A token id is only a row number. The model's first step is to look that row up in the **embedding "
    "matrix**: one row of learned numbers per vocabulary entry. From here on, every token is a vector, and the "
    "collection of the prompt's vectors is the matrix the rest of the model works on. Training arranges the "
    "rows so that tokens used alike tend to point alike. "
    + claims.closeness_sentence("cat", "dog", "banana", cat_dog, cat_banana)
)

view = prompt_tokens_or_stop()

vocab, width = emb.matrix_shape(model)
n = min(len(view.ids), HEATMAP_LIMIT)
st.header("The prompt's rows")
st.markdown(
    f"The embedding matrix of this model is **{vocab:,} × {width}** (vocabulary × model width): "
    f"{vocab * width:,} numbers. Your prompt selects {len(view.ids):,} of its rows."
)

if n < len(view.ids):
    st.warning(f"The prompt has {len(view.ids):,} tokens; the heatmap and the picker show the first {n}.")
rows = emb.rows_for(model, view.ids[:n])
scale = emb.embed_scale(model)
mean_length = float(np.linalg.norm(rows, axis=-1).mean())
if scale != 1.0:
    st.markdown(
        f"This model also **scales every row by √{width} = {scale:.2f}** before the first block: the rows "
        f"drawn here have an average length of {mean_length:.2f}, the vectors the first block reads "
        f"{scale * mean_length:.1f}."
    )
else:
    st.markdown(
        f"The rows enter the first block as stored (average length here {mean_length:.2f}): this model "
        "does not rescale them."
    )
charts.show(figs.embedding_heatmap(rows, view.pieces[:n], (vocab, width)), key="embedding_heatmap")

st.header("One token's vector and its neighbours")
token_labels = [f"{i}: {visible(view.pieces[i])}" for i in range(n)]  # a list's own lookup: no page global kept
pick = st.selectbox(
    "Token",
    options=list(range(n)),
    format_func=token_labels.__getitem__,
    **state.bind(state.EMB_TOKEN, min(1, n - 1), options=range(n)),
)
token_id, piece = view.ids[pick], view.pieces[pick]
left, right = st.columns([3, 2])
neighbours = emb.nearest(model, token_id)
with left:
    charts.show(figs.vector_chart(rows[pick], piece), key="embedding_vector")
with right:
    charts.show(figs.neighbour_chart(neighbours, piece), key="embedding_neighbours")
st.caption(
    f"Cosine similarity compares directions: 1 = same direction, 0 = unrelated. Computed against all "
    f"{vocab:,} rows of the matrix; token id {token_id} itself is left out."
)

st.header("A map of meaning (2-D projection)")
words_text = st.text_input(
    "Words to add to the map (comma-separated)",
    **state.bind(state.EMB_WORDS, ", ".join(w.strip() for w in emb.WORD_SET)),
)
words = tuple(" " + w.strip() for w in words_text.split(",") if w.strip())
projection = emb.project(model, view.ids[:n], words)
if len(projection.labels) < 3:
    st.info("Add a few words (or a longer prompt): a map needs at least three vectors to be worth drawing.")
pca_map = charts.show(
    figs.projection_scatter(projection.points, projection.labels, projection.groups, projection.explained),
    key="embedding_pca",
)
st.caption(
    claims.pca_caption(len(projection.labels), projection.explained, figs.unlabelled_points(pca_map))
    + " Token ids, by contrast, carry no such closeness (see the Tokenization page)."
)

st.header("How position enters")
if emb.position_scheme(model) == "rope":
    st.markdown(
        "The rows above say *what* each token is, not *where* it is: the same word has the same row at every "
        "position. This model uses **rotary position embeddings (RoPE)**: inside attention, each query and key is "
        "cut into 2-D pairs of numbers, and pair *i* is rotated by an angle proportional to the token's position. "
        "Fast pairs spin quickly (telling neighbours apart), slow pairs barely move (telling far-apart tokens apart). "
        "Because query and key are both rotated, their dot product depends only on how far apart they are."
    )
    bases = emb.rope_bases(model)
    local = False
    if len(bases) > 1:
        st.markdown(
            f"This model rotates with **two bases**: its local layers (the ones that see a sliding window "
            f"of recent tokens) with base {bases['local']:,.0f}, its global layers with "
            f"{bases['global']:,.0f}. A bigger base turns the slow pairs slower still, so positions "
            "far apart stay distinguishable over a long context."
        )
        local = (
            st.radio(
                "RoPE of",
                ["local layers", "global layers"],
                horizontal=True,
                **state.bind(state.EMB_ROPE_KIND, "local layers", options=["local layers", "global layers"]),
            )
            == "local layers"
        )
    angles = emb.rope_angles(model, ROPE_POSITIONS, local)  # (P, hd/2)
    n_pairs = angles.shape[1]
    pairs = sorted({0, n_pairs // 4, n_pairs // 2, n_pairs - 1})  # fast → slow frequency pairs
    wavelengths = emb.rope_wavelengths(model, local)
    charts.show(figs.rope_rotation(angles, pairs, wavelengths), key="rope_rotation")
    maps = att.attention_maps(model, view.ids)
    pieces = view.pieces[: maps.n_tokens]
    own = own_mask(model, state.get(state.PROMPT), bool(state.get(state.CHAT)))[: maps.n_tokens]
    words = own_words(pieces, own)
    pronoun = ref.find_pronoun(words)
    query = (
        words[pronoun].end - 1
        if pronoun is not None
        else max((i for i, mine in enumerate(own) if mine), default=maps.n_tokens - 1)
    )
    # The pair: of the strongest heads from the query onto an earlier word (never the first token, where weight
    # parks whatever the distance), the one whose score distance changes most, so the line shows what it claims.
    options = ref.rope_candidates(maps.probs, words, query) or [(0, 0, query)]
    scored = [
        (att.scores_by_distance(model, maps, layer, head, query, key), layer, head, key) for layer, head, key in options
    ]
    by_distance, layer, head, key = max(scored, key=lambda item: float(np.ptp(item[0].scores)))
    weight = float(maps.probs[layer, head, query, key])
    kind = ""
    if len(bases) > 1:
        is_local = layer in att.layer_layout(model).local_layers
        kind = f"a {'local' if is_local else 'global'} layer: RoPE base {bases['local' if is_local else 'global']:,.0f}"
    st.markdown(
        claims.rope_pair_sentence(
            pieces[query], pieces[key], layer, head, weight, by_distance.actual_distance, kind, by_distance.scores
        )
    )
    charts.show(
        figs.distance_scores(
            by_distance.distances,
            by_distance.scores,
            by_distance.actual_distance,
            by_distance.recorded,
            pieces[query],
            pieces[key],
        ),
        key="rope_distance",
    )
    cos_table = emb.rope_cos(model, 64, local)
    charts.show(
        figs.position_heatmap(
            cos_table,
            "cos(rotation angle) for positions 0–63, every frequency pair (the model's own table)",
            "frequency pair",
            "cos",
        ),
        key="rope_table",
    )
else:
    st.markdown(
        "This model learns one **position row** per position and adds it to the token's row before "
        "the first block: the same word at a different place gives a different vector."
    )
    learned = emb.learned_positions(model, n)
    charts.show(figs.position_heatmap(learned, "Learned position rows", "dimension", "value"), key="position_rows")

st.header("What to try next")
cat_id = emb.token_id_of(model, " cat")
cat_neighbours = [piece for _, piece, _ in emb.nearest(model, cat_id)] if cat_id is not None else []
st.markdown(
    (f"- {claims.neighbours_suggestion('cat', cat_id in view.ids[:n], cat_neighbours)}\n" if cat_neighbours else "")
    + "- Add your own words to the map: fruit, vehicles, verbs. Which ones cluster?\n"
    f"- {claims.repeated_token_sentence(view.pieces[:n], view.ids[:n], rows)}"
)
