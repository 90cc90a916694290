"""One chart spec gives the figure and its CSV table (``ui.common.chart``): they can't drift apart, and no page
hands a chart its data twice.

- The spec routes one argument list by name: each builder gets the parameters it names; an argument neither names,
  or one given twice, is an error at the call.
- Every spec of every chapter (found by walking ``ui/*/figures.py``) has hand-made arguments in
  ``tests/chart_samples.py``, and on them its table's rows stand for the figure's plotted points: as many rows as
  points (per series, or in all), and where a bar chart names its bars, the same labels in the same order.
- ``charts.show`` draws the spec's figure and hands out that same call's CSV, built only when asked.
- No ``charts.show`` call in ``pages/`` or ``ui/`` passes ``data=``, and each passes a spec's call, not a
  ``make_*`` figure.
"""

from __future__ import annotations

import ast
import csv
import importlib
import io
from pathlib import Path

import pytest

from tests.chart_samples import SAMPLES
from ui.common.chart import Chart
from ui.common.export import figure_rows

ROOT = Path(__file__).resolve().parents[1]

# How a table's rows stand for the figure's points: ("each", traces, k): each listed trace draws k points a row;
# ("sum", traces, k): together they draw k points a row (None: every trace); ("annotations", column): each row's
# value in ``column`` is written on the figure. Unlisted: ("each", (0,), 1), one point a row in the first trace.
ROWS_ARE = {
    "paged_kv.memory_timeline": ("each", (0, 1, 2), 1),
    "paged_kv.memory_at_step": ("each", (0, 1), 1),
    "attention.score_steps": ("each", (0, 1, 2, 3), 1),
    "attention.gqa_diagram": ("each", (4,), 1),
    "batching.request_latency": ("each", (0, 1, 2, 3), 1),
    "batching.memory_chart": ("sum", None, 2),  # a row: one mode at one step, reserved and used
    "batching.throughput_curve": ("each", (0, 1), 1),
    "class_page.guesses": ("each", (0, 1), 1),
    "embeddings.projection_scatter": ("sum", None, 1),
    "embeddings.rope_rotation": ("sum", (1, 2, 3, 4, 6, 7, 8, 9), 2),
    "experiments.before_after": ("each", (0, 1), 1),
    "generation.cache_timing": ("each", (0, 1), 1),
    "generation.phase_timeline": ("sum", None, 1),
    "generation.kv_heatmaps": ("sum", None, 1),
    "logit_lens.block_diagram": ("annotations", "stage"),
    "logits.probability_overlay": ("each", (0, 1), 1),
    "logits.temperature_sweep": ("each", (0, 1), 1),
    "quantization.block_layout": ("each", (0, 1), 1),
    "quantization.bytes_chart": ("each", (0, 1), 1),
    "quantization.mode_probabilities": ("sum", None, 1),
    "sampling.cumulative_ranges": ("sum", None, 1),
    "sampling.draw_histogram": ("each", (0, 1), 1),
    "speculative.p_vs_q": ("each", (0, 1), 1),
    "speculative.acceptance_test": ("each", (2,), 1),
    "speculative.sweep": ("each", (0, 1, 2), 1),
    "speculative.seed_counts": ("each", (0, 1), 1),
}
# Bar charts that name their bars: (table column, trace, axis): in order, each bar's label starts with the table's
# value in that column (a label may add the token id after it).
LABELS = {
    "lesson.token_reveal": ("token", 0, "x"),
    "logits.logits_bar": ("token", 0, "x"),
    "generation.alternatives_bar": ("token", 0, "y"),
    "class_page.guesses": ("token", 0, "x"),
    "experiments.before_after": ("token", 0, "x"),
    "embeddings.neighbour_chart": ("token", 0, "y"),
    "quantization.mode_speed": ("weights", 0, "x"),
    "logit_lens.answer_formation": ("layer", 0, "x"),
}


def all_specs() -> dict[str, Chart]:
    specs = {}
    for path in sorted(ROOT.glob("ui/*/figures.py")):
        module = importlib.import_module(f"ui.{path.parent.name}.figures")
        for name, value in vars(module).items():
            if isinstance(value, Chart):
                specs[f"{path.parent.name}.{name}"] = value
    return specs


def test_every_chart_spec_has_hand_made_arguments():
    assert set(all_specs()) == set(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_chart_table_stands_for_its_figure_points(name):
    args, kwargs = SAMPLES[name]
    call = all_specs()[name](*args, **kwargs)
    fig, table = call.figure(), call.table()
    assert table is not None and len(table) > 0
    rule = ROWS_ARE.get(name, ("each", (0,), 1))
    if rule[0] == "annotations":
        written = " ".join(str(a.text) for a in fig.layout.annotations)
        assert all(str(value) in written for value in table[rule[1]]), name
    else:
        mode, traces, per_row = rule
        points = [len(figure_rows(_only(fig, i))) for i in range(len(fig.data))]
        chosen = [points[i] for i in (traces if traces is not None else range(len(points)))]
        if mode == "each":
            assert chosen == [per_row * len(table)] * len(chosen), (name, points, len(table))
        else:
            assert sum(chosen) == per_row * len(table), (name, points, len(table))
    if name in LABELS:
        column, trace, axis = LABELS[name]
        rows = figure_rows(_only(fig, trace))
        drawn = [str(r[f"{axis}_label"] or r[axis]) for r in rows]
        assert len(drawn) == len(table) and all(d.startswith(str(v)) for d, v in zip(drawn, table[column])), name
    assert list(csv.reader(io.StringIO(call.csv())))[0] == list(table.columns)  # the CSV is that table


def _only(fig, index: int):
    """``fig`` with only its trace ``index`` (layout and axes kept), so its points can be counted alone."""
    import plotly.graph_objects as go

    return go.Figure(data=[fig.data[index]], layout=fig.layout)


def _bars(tokens: list[str], values: list[float], title: str = "t"):
    import plotly.graph_objects as go

    return go.Figure(go.Bar(x=tokens, y=values, name=title))


def _bars_table(tokens: list[str], values: list[float], token_ids: list[int]):
    import pandas as pd

    return pd.DataFrame({"token_id": token_ids, "token": tokens, "value": values})


def test_one_argument_list_is_routed_to_each_builder_by_name():
    bars = Chart(_bars, _bars_table)
    call = bars(["a", "b"], [1.0, 2.0], "Title", token_ids=[7, 8])
    assert call.figure().data[0].name == "Title"  # the title goes to the figure alone
    assert call.table().to_dict("list") == {"token_id": [7, 8], "token": ["a", "b"], "value": [1.0, 2.0]}
    with pytest.raises(TypeError, match="neither the figure nor its table takes"):
        bars(["a"], [1.0], token_ids=[7], colour="red")
    with pytest.raises(TypeError, match="both by position and by name"):
        bars(["a"], [1.0], tokens=["b"])
    with pytest.raises(TypeError, match="positional arguments"):
        bars(["a"], [1.0], "t", [7])


def test_show_draws_the_spec_figure_and_hands_out_the_same_calls_table_only_when_asked(monkeypatch):
    from ui.common import charts

    drawn, downloads, built = [], [], []
    monkeypatch.setattr(charts, "presenting", lambda: False)
    monkeypatch.setattr(charts, "file_stem", lambda key, name=None: key)
    monkeypatch.setattr(charts.st, "plotly_chart", lambda fig, **kwargs: drawn.append(fig))
    monkeypatch.setattr(charts.st, "download_button", lambda label, data, **kwargs: downloads.append(data))

    def table(tokens, values, token_ids):
        built.append(1)
        return _bars_table(tokens, values, token_ids)

    returned = charts.show(Chart(_bars, table)(["a", "b"], [1.0, 2.0], token_ids=[7, 8]), key="bars")
    assert returned is drawn[0] and list(drawn[0].data[0].x) == ["a", "b"] and built == []
    assert downloads[0]() == "token_id,token,value\n7,a,1.0\n8,b,2.0\n" and built == [1]


def _show_calls(path: Path) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "show"
        and getattr(node.func.value, "id", "") == "charts"
    ]


def test_no_page_passes_a_chart_its_data_twice():
    """Every ``charts.show`` in ``pages/`` and ``ui/`` is handed one spec call (``figs.logits_bar(...)``): no
    ``data=`` beside it, no ``make_*`` figure built apart from its table, and ``show`` takes no ``data`` at all."""
    import inspect

    from ui.common import charts

    assert "data" not in inspect.signature(charts.show).parameters
    found, wrong = 0, []
    for path in sorted([*ROOT.glob("pages/*.py"), *ROOT.glob("ui/**/*.py")]):
        for call in _show_calls(path):
            found += 1
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            if any(keyword.arg == "data" for keyword in call.keywords):
                wrong.append(f"{where} passes data=")
            chart = call.args[0] if call.args else None
            callee = chart.func if isinstance(chart, ast.Call) else None
            name = getattr(callee, "attr", None) or getattr(callee, "id", None)
            if callee is None or name is None or name.startswith("make_") or name == "shared":
                wrong.append(f"{where} does not pass a chart spec's call")
    assert found >= 50 and not wrong, wrong
