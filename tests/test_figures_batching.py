"""The Batching page's pure figure builders and its timeline grid, on hand-made data."""

from __future__ import annotations

import numpy as np

from inference import BatchRun, BatchStep
from ui.batching import figures as figs
from ui.batching.compute import _mode_run


def test_padded_batch_marks_padding():
    fig = figs.make_padded_batch([[None, None, "The", " cat"], ["Once", " upon", " a", " time"]])
    heat = fig.data[0]
    assert np.asarray(heat.z).tolist() == [[0, 0, 1, 1], [2, 2, 2, 2]]
    assert heat.text[0][:3] == ("pad", "pad", "The") or list(heat.text[0][:3]) == ["pad", "pad", "The"]


def test_mask_and_positions():
    mask = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 1]], dtype=bool)
    fig = figs.make_mask_heatmap(mask, [None, "a", "b"], 0)
    assert np.asarray(fig.data[0].z).tolist() == mask.astype(int).tolist()
    fig = figs.make_positions_heatmap(np.array([[0, 0, 1]]), np.array([[False, True, True]]))
    assert list(fig.data[0].text[0]) == ["pad→0", "0", "1"]


def step(index, phase, slots, finished):
    return BatchStep(
        index=index,
        phase=phase,
        request_ids=list(slots),
        new_tokens={r: 1 for r in slots},
        sampled={},
        batch_positions=len(slots),
        wasted_positions=0,
        cache_slots_in_use=len(slots),
        cache_slots_total=2,
        cache_positions_in_use=0,
        cache_positions_reserved=0,
        finished=finished,
        seconds=0.01,
        slots=slots,
    )


def test_timeline_grid_shows_idle_rows_and_free_slots():
    run = BatchRun(
        results=[],
        steps=[
            step(0, "prefill", {0: 0, 1: 1}, finished=[1]),
            step(1, "decode", {0: 0, 1: 1}, finished=[0]),  # static: request 1 still holds row 1
        ],
    )
    mode = _mode_run(run, 3, position_bytes=100, allocated_positions=8)
    grid = mode.grid
    assert mode.allocated_bytes == 800 and mode.late_prefills == []
    assert grid[:, 0].tolist() == [0, 1, figs.EMPTY]
    assert grid[:, 1].tolist() == [0, figs.IDLE, figs.EMPTY]
    fig = figs.make_batch_timeline(grid, ["prefill", "decode"], "t", "row")
    assert list(fig.data[0].x) == ["0P", "1"] and list(fig.data[0].text[1]) == ["1", "idle"]
    # requests are named by their table rows: with row 1 of the table left out, request 1 is row 2
    fig = figs.make_batch_timeline(grid, ["prefill", "decode"], "t", "row", labels=[0, 2])
    assert list(fig.data[0].text[0]) == ["0", "0"] and list(fig.data[0].text[1]) == ["2", "idle"]
    table = figs.timeline_table(grid, ["prefill", "decode"], [10.0, 5.0], "row", labels=[0, 2])
    assert table.loc[(table.step == 0) & (table.row == 1), "request"].item() == 2
    assert set(table.state) == {"running", "idle (finished, still computed)", "free"}


def test_a_request_paused_by_a_prefill_keeps_its_slot_in_the_timeline():
    run = BatchRun(
        results=[],
        steps=[
            step(0, "prefill", {0: 0}, finished=[]),
            step(1, "prefill", {1: 1}, finished=[]),  # request 0 holds slot 0 but is not in this forward
            step(2, "decode", {0: 0, 1: 1}, finished=[0]),
            step(3, "decode", {1: 1}, finished=[1]),  # slot 0 is free again
        ],
    )
    grid = _mode_run(run, 2, position_bytes=1, allocated_positions=1).grid
    assert grid[0].tolist() == [0, figs.PAUSED, 0, figs.EMPTY]
    fig = figs.make_batch_timeline(grid, ["prefill", "prefill", "decode", "decode"], "t", "slot")
    assert list(fig.data[0].text[0]) == ["0", "wait", "0", ""]
