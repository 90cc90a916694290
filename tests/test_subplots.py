"""``ui.common.subplots.subplots`` against Plotly's ``make_subplots``: the same figure, traces and axis updates
addressed to the same subplots, on the kinds of grid the chapters ask for."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from ui.common.subplots import grid_figure, subplots

GRIDS = [
    # attention's heatmap with its row sums, and its four steps
    dict(rows=1, cols=2, column_widths=[0.88, 0.12], horizontal_spacing=0.02, shared_yaxes=True, subplot_titles=["", "row sum"]),
    dict(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.06, subplot_titles=("raw", "scaled", "masked", "softmax")),
    # the KV cache's heads (K above V)
    dict(rows=2, cols=3, subplot_titles=[f"K/V head {h}" for h in range(3)] * 2, shared_yaxes=True,
         vertical_spacing=0.12, horizontal_spacing=0.03),
    dict(rows=1, cols=3, subplot_titles=("drafts kept", "tokens per forward", "speed-up vs plain"), horizontal_spacing=0.08),
    dict(specs=[[{"secondary_y": True}]]),
]  # fmt: skip


@pytest.mark.parametrize("arguments", GRIDS)
def test_a_grid_is_make_subplots_own_with_its_traces_and_axes_in_the_same_places(arguments):
    rows, cols = int(arguments.get("rows", 1)), int(arguments.get("cols", 1))
    secondary = {"secondary_y": True} if "specs" in arguments else {}
    built = []
    for make in (make_subplots, subplots):
        figure = make(**arguments)
        for row in range(1, rows + 1):
            for col in range(1, cols + 1):
                figure.add_trace(go.Bar(x=[row, col], y=[1, 2], name=f"{row},{col}"), row=row, col=col, **secondary)
        figure.update_xaxes(title_text="last column", row=rows, col=cols)
        figure.update_yaxes(type="log", row=1, col=1)
        figure.update_layout(title="a title", height=400)
        built.append(figure.to_plotly_json())
    assert built[0] == built[1]


def test_each_figure_is_its_own_and_the_grid_it_came_from_stays_as_it_was():
    first = subplots(rows=1, cols=2, subplot_titles=["a", "b"])
    first.layout.annotations[0].text = "changed"
    first.update_xaxes(range=[0, 1], row=1, col=2)
    assert (
        subplots(rows=1, cols=2, subplot_titles=["a", "b"]).to_plotly_json()
        == make_subplots(rows=1, cols=2, subplot_titles=["a", "b"]).to_plotly_json()
    )


def test_an_argument_that_is_not_a_json_value_is_refused_clearly():
    with pytest.raises(TypeError, match="not JSON serializable"):
        subplots(rows=1, cols=2, subplot_titles=[object(), "b"])


@pytest.mark.parametrize("arguments", [g for g in GRIDS if "specs" not in g])
def test_a_grid_made_in_one_construction_is_the_grid_updated_call_by_call(arguments):
    """``grid_figure`` (plain dicts, one construction) against ``make_subplots`` with ``add_trace(row=, col=)``,
    ``update_xaxes``/``update_yaxes(row=, col=)`` and ``update_layout``: the same figure, nested settings merged
    into the grid's own axes (domains, anchors, shared axes) rather than replacing them."""
    rows, cols = int(arguments.get("rows", 1)), int(arguments.get("cols", 1))
    cells = [(row, col) for row in range(1, rows + 1) for col in range(1, cols + 1)]
    figure = make_subplots(**arguments)
    for row, col in cells:
        figure.add_trace(go.Bar(x=[row, col], y=[1, 2], name=f"{row},{col}", marker_color="red"), row=row, col=col)
        figure.update_xaxes(title_text=f"x {row},{col}", tickangle=-60, row=row, col=col)
        figure.update_yaxes(type="log", tickfont_size=9, row=row, col=col)
    figure.update_layout(title="a title", height=400, yaxis_title="the first y", margin={"t": 10})
    made = grid_figure(
        arguments,
        [
            ({"type": "bar", "x": [r, c], "y": [1, 2], "name": f"{r},{c}", "marker": {"color": "red"}}, r, c)
            for r, c in cells
        ],
        {
            (r, c): (
                {"title": {"text": f"x {r},{c}"}, "tickangle": -60},
                {"type": "log", "tickfont": {"size": 9}},
            )
            for r, c in cells
        },
        {"title": {"text": "a title"}, "height": 400, "yaxis": {"title": {"text": "the first y"}}, "margin": {"t": 10}},
    )
    assert made.to_dict() == figure.to_dict()  # as Streamlit reads a figure (the default template written out)
    made.add_trace(go.Scatter(x=[0], y=[0]), row=rows, col=cols)  # the grid stays addressable afterwards
    assert made.data[-1].xaxis == figure.get_subplot(rows, cols).xaxis.anchor.replace("y", "x")


def test_a_grid_made_in_one_construction_leaves_the_callers_settings_as_they_were():
    """The settings are merged into copies: one dict handed to several cells and the layout is never written into."""
    import copy

    shared = {"title": {"text": "x"}, "tickangle": -60}
    layout = {"xaxis": {"title": {"font": {"size": 9}}}, "title": {"text": "t"}}
    before = copy.deepcopy((shared, layout))
    fig = grid_figure(GRIDS[1], [], {(row, 1): (shared, shared) for row in range(1, 5)}, layout)
    assert (shared, layout) == before
    assert fig.layout.xaxis.title.text == "x" and fig.layout.xaxis.title.font.size == 9
    assert fig.layout.xaxis2.title.font.size is None  # the layout's setting reached the first x axis alone
