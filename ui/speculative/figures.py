"""Pure figure builders for the Speculative decoding page.

Plain lists in, ``go.Figure`` out: every verifying step as a row of tokens (kept drafts, the first rejection,
the token the step ends with), one drafted token's p against q, its acceptance test on [0, 1) with u, the
residual distribution a replacement was drawn from, the sweep over draft depths or n-gram lengths, and many
seeds' first two tokens under plain and speculative decoding. Each figure has a ``*_table`` beside it: its
numbers under named columns, for the CSV.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from ui.common import format as fmt
from ui.common.chart import Chart
from ui.common.conventions import fit_cells, shared_range
from ui.common.subplots import subplots
from ui.common.token_text import visible

# A cell's kind in the step rows -> (colour, legend label)
KINDS = {
    "kept": ("#b7e4c7", "draft kept"),
    "rejected": ("#f5a3a3", "draft rejected (the first: the rest were not checked)"),
    "residual": ("#a5c8ff", "replacement, drawn from the residual"),
    "bonus": ("#ffe08a", "bonus token (every draft kept)"),
    "plain": ("#dee2e6", "plain step (nothing drafted)"),
}
P_COLOR, Q_COLOR, U_COLOR = "#1f77b4", "#ff7f0e", "#212529"
KEEP_COLOR, REJECT_COLOR = "#b7e4c7", "#f1f3f5"
PLAIN_COLOR, SPECULATIVE_COLOR = "#6c757d", "#0d6efd"


def _known(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _label(text: str) -> str:
    return visible(text) or "∅"


# -- the steps, one row each --------------------------------------------------------------------------------
def make_step_rows(rows: Sequence[Sequence[tuple[str, str, str]]], row_names: Sequence[str]) -> go.Figure:
    """Every step as one row of cells, left to right in the order they were judged: each cell (token text, kind,
    hover text), kind one of ``KINDS``. A row ends with the token the step ends with."""
    width = max((len(row) for row in rows), default=1)
    order = list(KINDS)
    z = [[order.index(kind) for _, kind, _ in row] + [None] * (width - len(row)) for row in rows]
    labels = [_label(text) for row in rows for text, _, _ in row]
    font, fitted = fit_cells(labels, max(width, 6), font_px=14)
    text = [[fitted[_label(t)] for t, _, _ in row] + [""] * (width - len(row)) for row in rows]
    hover = [[h for _, _, h in row] + [""] * (width - len(row)) for row in rows]
    n = len(order)
    colorscale = []
    for i, kind in enumerate(order):  # one flat band of colour per kind
        colorscale += [[i / n, KINDS[kind][0]], [(i + 1) / n, KINDS[kind][0]]]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(width)),
            y=list(range(len(rows))),
            zmin=-0.5,
            zmax=n - 0.5,
            colorscale=colorscale,
            showscale=False,
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=font),
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            xgap=3,
            ygap=3,
        )
    )
    for kind in order:  # the legend: one entry per kind shown
        if any(k == kind for row in rows for _, k, _ in row):
            fig.add_trace(
                go.Scatter(
                    x=[None],
                    y=[None],
                    mode="markers",
                    marker=dict(symbol="square", size=14, color=KINDS[kind][0]),
                    name=KINDS[kind][1],
                )
            )
    fig.update_layout(
        height=170 + 34 * len(rows),
        margin=dict(l=10, r=10, t=30, b=110),
        xaxis=dict(
            title="token in the step (drafts in order, then the step's own token)",
            dtick=1,
            zeroline=False,
            showgrid=False,
        ),
        yaxis=dict(
            tickvals=list(range(len(rows))),
            ticktext=list(row_names),
            autorange="reversed",
            zeroline=False,
            showgrid=False,
        ),
        legend=dict(orientation="h", yref="container", y=0.0, yanchor="bottom", x=0),  # under the axis title
        plot_bgcolor="white",
    )
    return fig


def step_rows_table(rows: Sequence[Sequence[tuple[str, str, str]]], row_names: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"step": name, "slot": slot, "token": visible(text), "kind": kind, "numbers": hover.replace("<br>", "; ")}
            for name, row in zip(row_names, rows)
            for slot, (text, kind, hover) in enumerate(row)
        ]
    )


step_rows = Chart(make_step_rows, step_rows_table)


# -- one drafted token ------------------------------------------------------------------------------------
def make_p_vs_q(
    tokens: Sequence[str], p: Sequence[float | None], q: Sequence[float | None], drafted: int, title: str
) -> go.Figure:
    """The model's p and the draft's q on the same tokens (the drafted one, index ``drafted``, marked ▸), bars from
    zero on one shared axis; a value the records do not hold (the token is outside that distribution's top
    entries) is no bar, labelled so."""
    labels = [("▸ " if i == drafted else "") + _label(t) for i, t in enumerate(tokens)]
    series = [
        (
            name,
            values,
            colour,
            [fmt.prob(v) if v is not None else "not in its top" for v in values],
            f"{name}: %{{x:.4g}}<extra></extra>",
        )
        for name, values, colour in (("p: the model", p, P_COLOR), ("q: the draft", q, Q_COLOR))
    ]
    axis = dict(
        title="probability (after the sampling settings)", range=shared_range(_known(p), _known(q), headroom=1.3)
    )
    return _grouped_rows(series, labels, title, 140 + 44 * len(tokens), axis)


def _grouped_rows(
    series: Sequence[tuple[str, Sequence, str, list[str], str]],
    labels: Sequence[str],
    title: str,
    height: int,
    xaxis: dict,
) -> go.Figure:
    """Series side by side as horizontal bars, one row per label from the top, the legend above: each series is
    (name, values, colour, the text on each bar, the hover template)."""
    positions = list(range(len(labels)))
    fig = go.Figure()
    for name, values, colour, text, hover in series:
        fig.add_trace(
            go.Bar(
                x=list(values),
                y=positions,
                orientation="h",
                name=name,
                marker_color=colour,
                text=text,
                textposition="outside",
                cliponaxis=False,
                hovertemplate=hover,
            )
        )
    fig.update_layout(
        title=title,
        barmode="group",
        height=height,
        margin=dict(l=10, r=50, t=90, b=10),
        xaxis=xaxis,
        yaxis=dict(tickvals=positions, ticktext=list(labels), autorange="reversed"),
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0),
    )
    return fig


def p_q_table(
    tokens: Sequence[str], ids: Sequence[int], p: Sequence[float | None], q: Sequence[float | None]
) -> pd.DataFrame:
    return pd.DataFrame({"token": [visible(t) for t in tokens], "id": list(ids), "p": list(p), "q": list(q)})


p_vs_q = Chart(make_p_vs_q, p_q_table)  # the table also takes ids= (by name)


def make_acceptance_test(keep_from: float, keep_to: float, u: float, accepted: bool, title: str) -> go.Figure:
    """[0, 1) with the stretch of u that keeps the draft shaded, and the u that was drawn: kept iff u lands in it."""
    fig = go.Figure()
    spans = [(0.0, keep_from, REJECT_COLOR, "rejects"), (keep_from, keep_to, KEEP_COLOR, "keeps the draft")]
    spans.append((keep_to, 1.0, REJECT_COLOR, "rejects"))
    for start, end, colour, name in spans:
        if end > start:
            fig.add_trace(
                go.Bar(
                    x=[end - start],
                    base=[start],
                    y=[0],
                    orientation="h",
                    marker_color=colour,
                    marker_line_color="#adb5bd",
                    marker_line_width=1,
                    name=name,
                    showlegend=False,
                    hovertemplate=f"u in {fmt.interval(start, end)}: {name}<extra></extra>",
                )
            )
    fig.add_trace(
        go.Scatter(
            x=[u],
            y=[0],
            mode="markers+text",
            marker=dict(symbol="line-ns", size=40, line=dict(width=3, color=U_COLOR)),
            text=[f"u = {u:.{fmt.interval_digits(keep_from, keep_to, u, digits=3)}f}"],
            textposition="top right" if u < 0.15 else ("top left" if u > 0.85 else "top center"),
            name="u",
            showlegend=False,
            hovertemplate=f"u = {u:.{fmt.interval_digits(keep_from, keep_to, u)}f}: "
            f"{'kept' if accepted else 'rejected'}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        height=170,
        margin=dict(l=10, r=10, t=60, b=40),
        xaxis=dict(range=[0, 1], title="u, uniform on [0, 1)", dtick=0.1),
        yaxis=dict(visible=False, range=[-0.6, 0.9]),
        barmode="overlay",  # the stretches lie end to end on one line
        bargap=0.3,
        plot_bgcolor="white",
    )
    return fig


def make_distribution(tokens: Sequence[str], probs: Sequence[float], drawn: int | None, title: str) -> go.Figure:
    """A distribution's top entries (the residual after a rejection, or p), the token drawn from it outlined."""
    positions = list(range(len(tokens)))
    fig = go.Figure(
        go.Bar(
            x=list(probs),
            y=positions,
            orientation="h",
            marker_color=[KINDS["residual"][0] if i == drawn else "#dee2e6" for i in positions],
            marker_line_color=["#0d6efd" if i == drawn else "#adb5bd" for i in positions],
            marker_line_width=2,
            text=[fmt.prob(v) for v in probs],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{x:.4g}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        height=100 + 32 * len(tokens),
        margin=dict(l=10, r=50, t=60, b=10),
        xaxis=dict(title="probability", range=shared_range(probs, headroom=1.25)),
        yaxis=dict(tickvals=positions, ticktext=[_label(t) for t in tokens], autorange="reversed"),
    )
    return fig


def acceptance_table(keep_from: float, keep_to: float, u: float, accepted: bool) -> pd.DataFrame:
    """The acceptance test's numbers: the stretch of [0, 1) that keeps the draft, the u drawn, the verdict."""
    return pd.DataFrame(
        {"keeps from": [keep_from], "keeps to": [keep_to], "u": [u], "kept": [accepted]},
    )


acceptance_test = Chart(make_acceptance_test, acceptance_table)


def distribution_table(tokens: Sequence[str], ids: Sequence[int], probs: Sequence[float]) -> pd.DataFrame:
    return pd.DataFrame({"token": [visible(t) for t in tokens], "id": list(ids), "probability": list(probs)})


distribution = Chart(make_distribution, distribution_table)  # the table also takes ids= (by name)


# -- the sweep --------------------------------------------------------------------------------------------
def make_sweep(
    settings: Sequence[int],
    acceptance: Sequence[float | None],
    tokens_per_forward: Sequence[float],
    speedup: Sequence[float],
    setting_name: str,
    title: str,
) -> go.Figure:
    """Drafts kept, tokens per forward and speed-up against plain decoding, for each setting (depth k or n-gram
    length n); a setting that drafted nothing has no acceptance bar (and says so on hover)."""
    fig = subplots(
        rows=1,
        cols=3,
        subplot_titles=("drafts kept", "tokens per forward", "speed-up vs plain"),
        horizontal_spacing=0.08,
    )
    x = [f"{setting_name} = {s}" for s in settings]
    panels = (  # (y, colour, text on the bar, hover, the bar's outline)
        (
            [0.0 if a is None else a for a in acceptance],
            KEEP_COLOR,
            ["none drafted" if a is None else fmt.pct(a) for a in acceptance],
            "%{x}: %{text}<extra></extra>",
            {"marker_line_color": "#2d6a4f", "marker_line_width": 1},
        ),
        (
            list(tokens_per_forward),
            P_COLOR,
            [f"{v:.2f}" for v in tokens_per_forward],
            "%{x}: %{y:.2f} tokens per forward<extra></extra>",
            {},
        ),
        (
            list(speedup),
            [SPECULATIVE_COLOR if v >= 1 else "#adb5bd" for v in speedup],
            [f"{v:.2f}×" for v in speedup],
            "%{x}: %{y:.2f}× plain decoding<extra></extra>",
            {},
        ),
    )
    for col, (y, colour, text, hover, outline) in enumerate(panels, start=1):
        bar = go.Bar(x=x, y=y, marker_color=colour, text=text, textposition="outside", cliponaxis=False, **outline)
        fig.add_trace(bar.update(hovertemplate=hover, showlegend=False), row=1, col=col)
    fig.add_hline(y=1.0, line_dash="dash", line_color="#495057", row=1, col=3)
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(range=shared_range(tokens_per_forward, headroom=1.2), row=1, col=2)
    fig.update_yaxes(range=shared_range(speedup, [1.0], headroom=1.2), row=1, col=3)
    fig.update_layout(title=title, height=330, margin=dict(l=10, r=10, t=80, b=10))
    return fig


def sweep_table(
    settings: Sequence[int],
    acceptance: Sequence[float | None],
    tokens_per_forward: Sequence[float],
    speedup: Sequence[float],
    setting_name: str,
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            setting_name: list(settings),
            "drafts kept": list(acceptance),
            "tokens per forward": list(tokens_per_forward),
            "speed-up vs plain": list(speedup),
        }
    )


sweep = Chart(make_sweep, sweep_table)


# -- many seeds -------------------------------------------------------------------------------------------
def make_seed_counts(cells: Sequence[str], plain: Sequence[int], speculative: Sequence[int], title: str) -> go.Figure:
    """How many seeds drew each pair of first tokens, plain decoding's beside speculative decoding's."""
    series = [
        (name, counts, colour, [f"{c:,}" for c in counts], f"{name}: %{{x}} seeds<extra></extra>")
        for name, counts, colour in (
            ("plain decoding", plain, PLAIN_COLOR),
            ("speculative", speculative, SPECULATIVE_COLOR),
        )
    ]
    axis = dict(title="seeds", range=shared_range(plain, speculative, smallest=1))
    return _grouped_rows(series, cells, title, 150 + 40 * len(cells), axis)


def seed_counts_table(cells: Sequence[str], plain: Sequence[int], speculative: Sequence[int]) -> pd.DataFrame:
    return pd.DataFrame({"first tokens": list(cells), "plain decoding": list(plain), "speculative": list(speculative)})


seed_counts = Chart(make_seed_counts, seed_counts_table)
