"""The embedding figure builders (ui.embeddings.figures), on hand-made data."""

from __future__ import annotations

import numpy as np

from ui.embeddings import figures as emb_figs

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
    assert "50.0%" in fig.layout.xaxis.title.text and "20.0%" in fig.layout.yaxis.title.text  # one decimal
    angles = np.outer(np.arange(5), [1.0, 0.1])
    rotation = emb_figs.make_rope_rotation(angles, [0, 1], np.array([6.28, 62.8]))
    assert len(rotation.data) == 2 * (1 + 5)  # a circle and one arrow per position, per pair
    assert np.asarray(emb_figs.make_position_heatmap(np.zeros((3, 4)), "t", "x", "c").data[0].z).shape == (3, 4)
    distance = emb_figs.make_distance_scores(np.arange(5), np.ones(5), 2, 1.0, " it", " cat")
    assert len(distance.data) == 2 and list(distance.data[1].x) == [2]


def test_pca_labels_never_overlap_and_the_rest_go_to_the_hover():
    import numpy as np

    from ui.embeddings.figures import (
        MAP_LABEL_PX,
        MAP_PLOT_PX,
        label_places,
        make_projection_scatter,
        map_ranges,
        unlabelled_points,
    )

    rng = np.random.default_rng(0)
    points = np.concatenate([rng.normal(0, 0.05, (6, 2)), rng.normal(0, 1, (14, 2))])  # a tight cluster, and the rest
    labels = [f"word{i}" for i in range(len(points))]
    ranges = map_ranges(points)
    places = label_places(points, labels, ranges)
    (x0, x1), (y0, y1) = ranges
    boxes = []
    for (x, y), label, place in zip(points, labels, places):
        if place is None:
            continue
        cx, cy = (x - x0) * MAP_PLOT_PX[0] / (x1 - x0), (y - y0) * MAP_PLOT_PX[1] / (y1 - y0)
        width, height = 0.6 * MAP_LABEL_PX * len(label), 1.2 * MAP_LABEL_PX
        vertical, horizontal = place.split()
        left = {"center": cx - width / 2, "right": cx + 6, "left": cx - 6 - width}[horizontal]
        bottom = {"middle": cy - height / 2, "top": cy + 6, "bottom": cy - 6 - height}[vertical]
        boxes.append((left, bottom, left + width, bottom + height))
    assert all(
        not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
    )
    assert None in places[:6]  # the cluster cannot label every point
    fig = make_projection_scatter(points, labels, ["prompt"] * 6 + ["word set"] * 14, (0.4, 0.2))
    assert unlabelled_points(fig) == places.count(None)
    assert all(text for trace in fig.data for text in trace.customdata)  # every point keeps its hover label
