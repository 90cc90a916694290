"""Part-1 figure builders (pure, on hand-made data) and the cached helpers behind them (real model)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from ui.figures import attention as att_figs
from ui.figures import embeddings as emb_figs
from ui.figures.tokens import make_token_id_chart, token_chips_html, visible

PIECES = ["The", " cat", " sat", "."]


def _uniform_causal(t: int) -> np.ndarray:
    probs = np.tril(np.ones((t, t)))
    return probs / probs.sum(-1, keepdims=True)


# -- tokens ---------------------------------------------------------------------------
def test_visible_marks_whitespace_and_controls():
    assert visible(" a\nb\tc\x00\x07") == "·a↵b→c␀␇"


def test_token_chips_escape_html_and_show_ids_and_specials():
    html = token_chips_html(["<script>", " x"], [5, 6], [True, False])
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert ">5</span>" in html and ">6</span>" in html and "#e85d04" in html
    assert "unicode-bidi:isolate" in html


def test_token_id_chart_has_one_bar_per_token():
    fig = make_token_id_chart(PIECES, [504, 2644, 2643, 30])
    assert isinstance(fig, go.Figure)
    assert list(fig.data[0].y) == [504, 2644, 2643, 30] and len(fig.data[0].x) == 4


# -- embeddings -----------------------------------------------------------------------
def test_embedding_heatmap_shape_and_title():
    rows = np.arange(4 * 6, dtype=np.float32).reshape(4, 6) - 10
    fig = emb_figs.make_embedding_heatmap(rows, PIECES, (49152, 576))
    assert np.asarray(fig.data[0].z).shape == (4, 6)
    assert "49,152 × 576" in fig.layout.title.text


def test_vector_neighbour_projection_and_position_figures():
    assert len(emb_figs.make_vector_chart(np.ones(8), " cat").data[0].y) == 8
    neighbours = [(1, " Cat", 0.7), (2, " dog", 0.5)]
    assert list(emb_figs.make_neighbour_chart(neighbours, " cat").data[0].x) == [0.7, 0.5]
    points = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    fig = emb_figs.make_projection_scatter(points, ["a", "b", "c"], ["prompt", "word set", "word set"], (0.5, 0.2))
    assert [len(trace.x) for trace in fig.data] == [1, 2]
    assert "50%" in fig.layout.xaxis.title.text
    angles = np.outer(np.arange(5), [1.0, 0.1])
    rotation = emb_figs.make_rope_rotation(angles, [0, 1], np.array([6.28, 62.8]))
    assert len(rotation.data) == 2 * (1 + 5)  # a circle and one arrow per position, per pair
    assert np.asarray(emb_figs.make_position_heatmap(np.zeros((3, 4)), "t", "x", "c").data[0].z).shape == (3, 4)
    distance = emb_figs.make_distance_scores(np.arange(5), np.ones(5), 2, 1.0, " it", " cat")
    assert len(distance.data) == 2 and list(distance.data[1].x) == [2]


# -- attention ------------------------------------------------------------------------
def test_attention_heatmap_masks_future_and_shows_row_sums():
    fig = att_figs.make_attention_heatmap(_uniform_causal(4), PIECES, "t")
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (4, 4)
    assert np.isnan(z[np.triu_indices(4, k=1)]).all() and not np.isnan(z[np.tril_indices(4)]).any()
    assert np.allclose(fig.data[1].x, 1.0)


def test_heads_grid_one_heatmap_per_head_with_kv_groups():
    probs = np.stack([_uniform_causal(4)] * 9)
    fig = att_figs.make_heads_grid(probs, PIECES, [h // 3 for h in range(9)], layer=2)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert len(fig.data) == 1 and z.shape == (3 * 4 + 2, 3 * 4 + 2)  # 3 × 3 tiles of 4 × 4, 1-cell gaps
    assert np.allclose(z[5:9, 5:9][np.tril_indices(4)], _uniform_causal(4)[np.tril_indices(4)])  # head 4's tile
    assert np.isnan(z[4]).all() and np.isnan(z[:, 4]).all()  # the gaps
    titles = [a.text for a in fig.layout.annotations]
    assert "head 4 · K/V head 1" in titles and "head 8 · K/V head 2" in titles


def test_score_steps_four_panels_and_minus_infinity_labels():
    raw = np.array([8.0, 4.0, -2.0, 1.0])
    scaled = raw / 8
    masked = np.where(np.arange(4) <= 1, scaled, -np.inf)
    probs = np.exp(masked - masked.max())
    probs /= probs.sum()
    fig = att_figs.make_score_steps(raw, scaled, masked, probs, PIECES, query=1, head_dim=64)
    bars = [trace for trace in fig.data if isinstance(trace, go.Bar)]
    assert len(bars) == 4 and list(bars[0].y) == list(raw)
    assert np.isnan(np.asarray(bars[2].y, dtype=float)[2:]).all()
    labels = [trace for trace in fig.data if isinstance(trace, go.Scatter)][0]
    assert list(labels.text) == ["−∞", "−∞"]


def test_query_over_layers_and_gqa_diagram():
    fig = att_figs.make_query_over_layers(np.full((30, 4), 0.25), PIECES, query=3)
    assert np.asarray(fig.data[0].z).shape == (30, 4)
    gqa = att_figs.make_gqa_diagram(9, 3)
    assert len(gqa.data) == 9 + 2  # one wire per query head, then the two rows of nodes
    assert len(gqa.data[-2].x) == 9 and len(gqa.data[-1].x) == 3


# -- cached helpers on the real model --------------------------------------------------
@pytest.fixture
def real(engine, monkeypatch):
    """Point the UI helpers at the session's engine instead of loading a second one."""
    from ui import compute_attention, compute_embeddings, compute_tokens

    for module in (compute_tokens, compute_embeddings, compute_attention):
        monkeypatch.setattr(module, "get_engine", lambda: engine)
    compute_tokens._merge_ranks.cache_clear()
    return engine


@pytest.mark.real_model
@pytest.mark.parametrize("word", ["thecatsatonthemat", " inference", " tokenization", "héllo", " 🙂"])
def test_replayed_merges_match_the_tokenizer(real, word):
    from ui.compute_tokens import bpe_steps

    steps = bpe_steps(word)
    assert steps[0].merged is None and all(s.rank is not None for s in steps[1:])
    assert steps[-1].parts == real.tokenizer.raw_tokens(real.tokenizer.encode(word))


@pytest.mark.real_model
def test_token_pieces_are_byte_exact_and_specials_flagged(real):
    from ui.compute_tokens import token_bytes, tokenize

    text = "héllo 🙂 שלום\x00\x07\n\tend"
    view = tokenize(text, False)
    assert b"".join(token_bytes(r) for r in view.raw) == text.encode("utf-8")
    assert "<0xD7>" in view.pieces and view.n_bytes == len(text.encode("utf-8"))
    chat = tokenize("The cat", True)
    assert any(chat.special) and "<|im_start|>" in chat.pieces


@pytest.mark.real_model
def test_word_level_bytes_and_tiny_bpe(real):
    from ui.compute_tokens import UNK, id_neighbours, raw_bytes, train_tiny_bpe, word_level

    assert [w for w, _ in word_level("the cat thecatsatonthemat", "the cat sat")] == ["the", "cat", UNK]
    assert raw_bytes("é") == [0xC3, 0xA9]
    tiny = train_tiny_bpe("the cat sat on the mat. " * 5, 280, "the cat")
    assert 0 < len(tiny.merges) <= 280 - 256 and tiny.tokens
    assert ("a", "t") in tiny.merges[:5]
    around = id_neighbours(" cat")
    assert [i for i, _ in around] == list(range(2641, 2648)) and (2644, " cat") in around


@pytest.mark.real_model
def test_embedding_helpers_read_the_real_matrix(real):
    from ui import compute_embeddings as emb

    assert emb.matrix_shape() == (real.config.vocab_size, real.config.d_model)
    rows = emb.rows_for([2644, 2767])
    assert rows.shape == (2, real.config.d_model)
    assert np.allclose(rows[0], real.model.embed.weight[2644].detach().numpy())
    neighbours = emb.nearest(2644)
    cosines = [c for _, _, c in neighbours]
    assert cosines == sorted(cosines, reverse=True) and 2644 not in [i for i, _, _ in neighbours]
    assert {" cats", " Cat", " dog"} & {p for _, p, _ in neighbours}
    projection = emb.project([504, 2644], (" cat", " dog", " banana"))
    assert projection.points.shape == (4, 2)  # " cat" is already a prompt token
    assert 0 < sum(projection.explained) <= 1.0 + 1e-6
    angles = emb.rope_angles(8)
    assert np.allclose(np.cos(angles), emb.rope_cos(8), atol=1e-5)
    assert emb.rope_wavelengths()[0] == pytest.approx(2 * np.pi, rel=1e-3)


@pytest.mark.real_model
def test_score_steps_reproduce_the_recorded_forward(real):
    import torch

    from ui.compute_attention import attention_maps, query_over_layers, score_steps, top_heads

    ids = real.tokenizer.encode("The cat sat on the mat because it was tired.")
    maps = attention_maps(ids)
    assert maps.probs.shape == (real.config.n_layers, real.config.n_heads, len(ids), len(ids))
    assert np.allclose(maps.probs.sum(-1), 1.0, atol=1e-5)
    _, trace = real.traced_forward(ids)
    steps = score_steps(maps, layer=3, head=2, query=7)
    recorded = trace.layers[3].scaled_scores[0, 2, 7].numpy()
    assert np.allclose(steps.masked, recorded, atol=1e-4, equal_nan=False)
    softmax = torch.softmax(torch.tensor(steps.masked), -1).numpy()
    assert np.allclose(softmax, steps.probs, atol=1e-5)
    assert query_over_layers(maps, 7).shape == (real.config.n_layers, len(ids))
    best = top_heads(maps, query=7, key=1)
    assert best[0][2] >= best[-1][2] and maps.kv_group(8) == 2


@pytest.mark.real_model
def test_attention_is_capped_for_long_prompts(real):
    from ui.compute_attention import MAX_TOKENS, attention_maps

    ids = real.tokenizer.encode("word " * 300)
    maps = attention_maps(ids)
    assert maps.n_tokens == MAX_TOKENS and maps.total_tokens == len(ids) > MAX_TOKENS


@pytest.mark.real_model
def test_rope_scores_by_distance_reproduce_the_recorded_score(real):
    from ui.compute_attention import attention_maps, scores_by_distance

    ids = real.tokenizer.encode("The cat sat on the mat because it was tired.")
    maps = attention_maps(ids)
    for layer, head in ((0, 0), (13, 8), (29, 4)):
        result = scores_by_distance(maps, layer, head, query=7, key=1)
        assert result.actual_distance == 6
        assert result.scores[6] == pytest.approx(result.recorded, abs=1e-3)
    same_distance = scores_by_distance(maps, 5, 2, query=4, key=4)
    assert same_distance.scores[0] == pytest.approx(same_distance.recorded, abs=1e-3)
