"""The embedding figure builders (ui.figures.embeddings), on hand-made data."""
from __future__ import annotations

import numpy as np

from ui.figures import embeddings as emb_figs

PIECES = ["The", " cat", " sat", "."]


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
