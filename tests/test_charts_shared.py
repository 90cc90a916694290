"""A figure shared between sessions (``charts.show(..., shared=True)``) is finished when it is built and never
changed after: two sessions updating one Plotly figure at once broke Plotly's own dictionaries ("OrderedDict mutated
during iteration", a follower's Attention page on a two-replica school)."""

from __future__ import annotations

import copy
import threading

import plotly.graph_objects as go
import plotly.io
import plotly.tools
import pytest

from ui.common import charts
from ui.common.chart import Chart

UPDATES = ("update_xaxes", "update_yaxes", "update_layout", "update_traces", "update")


def make_bars(labels: tuple[str, ...], values: tuple[float, ...]) -> go.Figure:
    return go.Figure(go.Bar(x=list(labels), y=list(values)))


BARS = Chart(make_bars, None)


@pytest.fixture
def shared_figures():
    """Every figure object the shared cache hands out, and every update made on one of them after that."""
    handed, touched = [], []
    cached = charts.shared(make_bars)

    def recording(*args, **kwargs):
        fig = cached(*args, **kwargs)
        handed.append(fig)
        return fig

    originals = {name: getattr(go.Figure, name) for name in UPDATES}

    def watch(name):
        def update(self, *args, **kwargs):
            if any(self is fig for fig in handed):
                touched.append(name)
            return originals[name](self, *args, **kwargs)

        return update

    charts._shared_cache, restore = (lambda builder: recording), charts._shared_cache
    for name in UPDATES:
        setattr(go.Figure, name, watch(name))
    try:
        yield handed, touched
    finally:
        charts._shared_cache = restore
        for name, original in originals.items():
            setattr(go.Figure, name, original)


def test_show_never_changes_a_shared_figure(shared_figures):
    handed, touched = shared_figures
    for _ in range(3):  # three sessions showing the same chart
        charts.show(BARS(("a", "b"), (0.5, 0.5)), key="bars", shared=True)
    assert len(handed) == 3 and handed[0] is handed[1] is handed[2]  # one figure for all of them
    assert touched == []
    assert handed[0].layout.xaxis.automargin is True and handed[0].layout.xaxis.ticklabeloverflow == "allow"


def test_a_figure_of_ones_own_still_keeps_its_tick_labels():
    fig = charts.show(BARS(("a", "b"), (0.5, 0.5)), key="own")
    assert fig.layout.xaxis.automargin is True and fig.layout.xaxis.ticklabeloverflow == "allow"


def test_sessions_showing_one_shared_figure_at_once_do_not_collide():
    """Eight threads drawing the same shared chart: none fails (each used to update the one figure)."""
    errors = []

    def session():
        try:
            for _ in range(20):
                charts.show(BARS(("x", "y", "z"), (0.2, 0.3, 0.5)), key="bars", shared=True)
        except Exception as error:  # noqa: BLE001  (what a session would have shown)
            errors.append(repr(error))

    threads = [threading.Thread(target=session) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_a_finished_figure_serialises_as_the_figure_it_was_built_from():
    """``st.plotly_chart`` reads a figure through ``to_dict``: a finished one hands out the dict made when it was
    built (one object, not a deep copy a run), and it is the very dict the figure itself gives."""
    built = make_bars(("a", "b", "c"), (0.2, 0.3, 0.5))
    plain = plotly.io.to_json(plotly.tools.return_figure_from_figure_or_data(built, True), validate=False)
    finished = charts.FinishedFigure.of(make_bars(("a", "b", "c"), (0.2, 0.3, 0.5)))
    assert finished.to_dict() is finished.to_dict()
    assert plotly.io.to_json(plotly.tools.return_figure_from_figure_or_data(finished, True), validate=False) == plain
    assert plotly.io.to_json(finished.to_dict(), validate=False) == plain  # streamlit's read left it as it was


def test_a_copy_of_a_finished_figure_is_a_plain_figure_free_to_change():
    """Presenter mode draws from ``copy.deepcopy`` of the shared figure and grows its text: the copy changes, the
    shared figure and the dict it hands out do not."""
    shared = charts.show(BARS(("a", "b"), (0.5, 0.5)), key="bars", shared=True)
    assert isinstance(shared, charts.FinishedFigure)
    before = plotly_json(shared)
    big = charts.presenter_copy(shared)
    assert type(big) is go.Figure and big.layout.font.size == round(12 * charts.FONT_SCALE)
    assert plotly_json(shared) == before and shared.layout.font.size is None
    again = copy.deepcopy(shared)
    again.update_layout(title="changed")
    assert plotly_json(shared) == before and plotly_json(again) != before


def test_a_finished_subplot_grid_survives_a_copy():
    from ui.common.subplots import subplots

    fig = charts.FinishedFigure.of(subplots(rows=1, cols=2))
    copied = copy.deepcopy(fig)
    copied.add_trace(go.Bar(x=["a"], y=[1]), row=1, col=2)  # needs the grid
    assert copied.data[0].xaxis == "x2"


def plotly_json(fig: go.Figure) -> str:
    return plotly.io.to_json(fig.to_dict(), validate=False)
