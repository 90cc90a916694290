"""The attention figure builders (ui.attention.figures), on hand-made data."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.attention import figures as att_figs

PIECES = ["The", " cat", " sat", "."]


def _uniform_causal(t: int) -> np.ndarray:
    probs = np.tril(np.ones((t, t)))
    return probs / probs.sum(-1, keepdims=True)


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


def test_attention_heatmap_masks_keys_outside_a_local_window():
    fig = att_figs.make_attention_heatmap(_uniform_causal(4), PIECES, "t", window=2)
    z = np.asarray(fig.data[0].z, dtype=float)
    outside = np.tril(np.ones((4, 4), dtype=bool), k=-2)  # keys two or more positions back
    assert np.isnan(z[outside]).all() and not np.isnan(z[np.tril(np.ones((4, 4), dtype=bool)) & ~outside]).any()


def test_window_heatmap_masks_whole_cells_outside_the_window_only_for_a_local_layer():
    pooled = np.tril(np.ones((8, 8))) * 0.1  # 8 x 8 cells of 4 positions: 32 positions, window 8
    local = np.asarray(att_figs.make_window_heatmap(pooled, 4, 32, 8, "t", local=True).data[0].z, dtype=float)
    global_ = np.asarray(att_figs.make_window_heatmap(pooled, 4, 32, 8, "t", local=False).data[0].z, dtype=float)
    assert np.isnan(local[7, :5]).all() and not np.isnan(local[7, 5:]).any()  # queries 28-31 see keys 21 on
    assert not np.isnan(global_[np.tril_indices(8)]).any()
    edge = att_figs.make_window_heatmap(pooled, 4, 32, 8, "t", local=True).data[1]
    assert list(edge.x) == [0, 24] and list(edge.y) == [7, 31]  # key = query - window + 1


def test_gqa_diagram_names_the_kind_of_sharing():
    assert att_figs.make_gqa_diagram(4, 1).layout.title.text.startswith(
        "Multi-query attention: 4 query heads share 1 K/V head"
    )
    assert att_figs.make_gqa_diagram(9, 3).layout.title.text.startswith("Grouped-query attention")
    kinds = att_figs.make_layer_kinds([0, 1, 3], 4, 512).data[0]
    assert list(kinds.z[0]) == [1.0, 1.0, 0.0, 1.0]


def test_window_and_layer_kind_tables():
    """A 4-block pooled map (blocks of 8) with a window of 16: the table masks exactly the cells the chart greys."""
    from ui.attention.figures import layer_kinds_table, window_table

    pooled = np.tril(np.ones((4, 4))) / 4
    local, global_ = window_table(pooled, 8, 16, True), window_table(pooled, 8, 16, False)
    assert len(local) == 10 and np.allclose(local["max_weight"], 0.25)  # the 10 visible cells of a 4 x 4 triangle
    behind = local[local["behind_window"]]
    assert set(zip(behind["query_from"], behind["key_from"])) == {(24, 0)}  # keys 0-7 for queries 24-31: all 17+ back
    assert behind["masked"].all() and not global_["masked"].any()
    z = np.asarray(att_figs.make_window_heatmap(pooled, 8, 32, 16, "t", True).data[0].z, dtype=float)
    drawn = {(8 * r, 8 * c) for r, c in zip(*np.tril_indices(4)) if np.isnan(z[r, c])}
    assert drawn == set(zip(behind["query_from"], behind["key_from"]))
    kinds = layer_kinds_table([0, 1], 3, 512)
    assert kinds["kind"].tolist() == ["local", "local", "global"] and kinds["keys_seen"].tolist()[-1] == "all"
