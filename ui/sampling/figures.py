"""Pure figure builders for the Sampling page: cumulative ranges with u, draws vs probabilities, token strips.

Every function takes plain lists/numbers and returns a ``go.Figure`` (the ``*_table``
builders: the same numbers under named columns, for the chart's CSV); the numbers come
from the engine's sampler (see ``ui/sampling/compute.py``), never from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common import format as fmt
from ui.common.chart import Chart, ChartCall
from ui.common.conventions import fit_cells
from ui.common.token_text import visible_token
from ui.common.traces import share_heatmap
from ui.logits.figures import GREEDY_COLOR, LEGEND_ABOVE, compared_bars, reference_bars

if TYPE_CHECKING:
    from ui.sampling.compute import Histogram

_PALETTE = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
OTHER_COLOR = "#e0e0e0"


def toy_ranges(probs: Sequence[float]) -> tuple[list[float], list[float]]:
    """Starts and ends of each probability's range on [0, 1), laid end to end in the given order."""
    ends = np.cumsum(np.asarray(probs, dtype=np.float64))
    starts = np.concatenate([[0.0], ends[:-1]])
    return starts.tolist(), ends.tolist()


def make_cumulative_ranges(
    labels: Sequence[str],
    starts: Sequence[float],
    ends: Sequence[float],
    u: float | None,
    chosen_index: int | None,
    title: str,
    other_label: str | None = None,
    token_labels: bool = True,
) -> go.Figure:
    """The survivors laid end to end on [0, 1), u marked, the range it lands in highlighted.

    ``labels``/``starts``/``ends`` describe the ranges shown; when they stop before 1
    the remainder is one grey segment named ``other_label``. ``chosen_index`` is the
    shown range that holds u (None when the chosen token is in the remainder). With
    ``token_labels`` the labels are token texts and their whitespace is made visible.
    """
    shown = visible_token if token_labels else str
    segments = list(zip(labels, starts, ends))
    if other_label and ends and ends[-1] < 1.0:
        segments.append((other_label, ends[-1], 1.0))
    holding = segments[chosen_index] if chosen_index is not None else (segments[-1] if segments else (0.0, 1.0))
    u_decimals = fmt.interval_digits(holding[-2], holding[-1], *([u] if u is not None else []))
    # one trace, a bar per range (each its own colour, outline, text and hover): a trace per range took ~1.6 ms
    # each to build, most of a Sampling page run's Python under a class's load (docs/benchmarks.md)
    names, colors, outlines, widths, texts, hovers = [], [], [], [], [], []
    for i, (label, start, end) in enumerate(segments):
        is_other = other_label is not None and i == len(labels)
        chosen = (i == chosen_index) or (is_other and chosen_index is None and u is not None)
        width = end - start
        name = label if is_other else shown(label)
        names.append(label)
        colors.append(OTHER_COLOR if is_other else _PALETTE[i % len(_PALETTE)])
        outlines.append(GREEDY_COLOR if chosen else "white")
        widths.append(4 if chosen else 1)
        texts.append(f"{name}<br>{start:.2f}–{end:.2f}" if width > 0.07 else "")
        hovers.append(f"{name}: {fmt.interval(start, end)} · p = {fmt.prob(width, 4)}<extra></extra>")
    layout = {
        "title": title,
        "barmode": "overlay",
        "height": 200,
        "margin": {"t": 70, "b": 30, "l": 10, "r": 10},
        "xaxis": {"range": [0, 1], "tickformat": ".1f", "dtick": 0.1, "title": "[0, 1)"},
    }
    if u is not None:  # a line and its label in the layout itself: add_vline is slow
        layout["shapes"] = [
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": u,
                "x1": u,
                "y0": -0.1,
                "y1": 1.1,
                "line": {"color": GREEDY_COLOR, "width": 3},
            }
        ]
        layout["annotations"] = [
            {
                "x": u,
                "y": 1.12,
                "xref": "x",
                "yref": "paper",
                "text": f"u = {u:.{u_decimals}f}",
                "showarrow": False,
                "yanchor": "bottom",
                "font": {"color": GREEDY_COLOR},
            }
        ]
    bars = {
        "type": "bar",
        "x": [end - start for _, start, end in segments],  # (S,) each range's width
        "base": [start for _, start, _ in segments],  # (S,)
        "y": [""] * len(segments),  # one row: the ranges end to end
        "orientation": "h",
        "name": "ranges",
        "customdata": names,  # (S,) each range's token as the sampler gave it
        "marker": {"color": colors, "line": {"color": outlines, "width": widths}},
        "text": texts,
        "textposition": "inside",
        "insidetextanchor": "middle",
        "showlegend": False,
        "hovertemplate": hovers,
    }
    fig = go.Figure(data=[bars], layout=layout)  # plain dicts: validated once, as the figure is made
    return fig


def make_draw_histogram(
    labels: Sequence[str],
    observed: Sequence[float],
    expected: Sequence[float],
    n_draws: int,
    statistic: float,
    dof: int,
    p_value: float,
    who: str = "",
) -> go.Figure:
    """Observed frequency of each token over ``n_draws`` next to its exact probability, with the chi-square result
    (``who`` starts the title: the class view's "The class (12 students): ")."""
    x = list(range(len(labels)))
    fig = go.Figure(
        [
            reference_bars(
                x,
                expected,
                "exact probability (the sampler's)",
                customdata=[fmt.prob(p, 4) for p in expected],
                hovertemplate="p = %{customdata}<extra></extra>",
            ),
            compared_bars(
                x,
                observed,
                f"observed frequency in {n_draws:,} draws",
                [f"{v:.3f}" for v in observed],
                hovertemplate="%{y:.4f}<extra></extra>",
            ),
        ]
    )
    ticks = [t.replace("other (", "other<br>(") if t.startswith("other (") else visible_token(t) for t in labels]
    fig.update_xaxes(tickmode="array", tickvals=x, ticktext=ticks)
    verdict = f"χ² = {statistic:.2f}, dof = {dof}, p = {p_value:.3g}" if dof else "one token only: nothing to test"
    if not n_draws:
        verdict = "no draws yet"
    elif not dof and len(labels) > 1:  # every token expected < 5 times: pooled into one bin (ui.sampling.compute)
        verdict = "too few draws for a χ² test yet"
    fig.update_layout(
        barmode="group",
        title=f"{who}{n_draws:,} draws vs the exact probabilities · {verdict}",
        yaxis={"title": "probability / frequency", "rangemode": "tozero"},
        height=380,
        legend=LEGEND_ABOVE,
        margin={"t": 80, "b": 40},
    )
    return fig


def make_token_strips(
    rows: Sequence[Sequence[str]],
    row_labels: Sequence[str],
    probabilities: Sequence[Sequence[float]],
    diverge_index: int | None,
    title: str,
) -> go.Figure:
    """Continuations as rows of token tiles, colour = the chosen token's probability; first divergence boxed."""
    width = max((len(r) for r in rows), default=0)
    z = np.full((len(rows), width), np.nan)
    text = np.full((len(rows), width), "", dtype=object)
    hover = np.full((len(rows), width), "", dtype=object)
    # a token such as <0xE3><0x83> gets a smaller font, or is cut, in its cell; the hover has it whole
    size, drawn = fit_cells([visible_token(t) for tokens in rows for t in tokens], width, 13)
    for r, (tokens, probs) in enumerate(zip(rows, probabilities)):
        z[r, : len(probs)] = probs
        text[r, : len(tokens)] = [drawn[visible_token(t)] for t in tokens]
        hover[r, : len(tokens)] = [f"{visible_token(t)}<br>p = {fmt.prob(p)}" for t, p in zip(tokens, probs)]
    layout = {
        "title": title,
        "height": 140 + 55 * len(rows),
        "margin": {"t": 70, "b": 40, "l": 10},
        "xaxis": {"title": "generated token #", "dtick": 1},
        "yaxis": {"autorange": "reversed"},
    }
    if diverge_index is not None and diverge_index < width:  # the first divergence boxed, its label above
        layout["shapes"] = [
            {
                "type": "rect",
                "x0": diverge_index - 0.5,
                "x1": diverge_index + 0.5,
                "y0": -0.5,
                "y1": len(rows) - 0.5,
                "line": {"color": GREEDY_COLOR, "width": 3},
            }
        ]
        layout["annotations"] = [
            {
                "x": diverge_index,
                "y": -0.5,
                "yanchor": "bottom",
                "text": "first divergence",
                "showarrow": False,
                "font": {"color": GREEDY_COLOR},
            }
        ]
    strips = share_heatmap(
        z,
        row_labels,
        "YlGnBu",
        3,
        "p",
        text=text,
        texttemplate="%{text}",
        textfont={"size": size},
        customdata=hover,
        hovertemplate="position %{x}: %{customdata}<extra>%{y}</extra>",
    )
    fig = go.Figure(data=[strips], layout=layout)  # the layout as one dict: validated once, no relayouts
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------
def ranges_table(
    labels: Sequence[str],
    starts: Sequence[float],
    ends: Sequence[float],
    u: float | None,
    chosen_index: int | None,
    other_label: str | None = None,
    token_labels: bool = True,
) -> pd.DataFrame:
    """One row per range on [0, 1) as drawn (the grey remainder last, when there is one)."""
    shown = visible_token if token_labels else str
    rows = [
        {
            "rank": i + 1,
            "token": shown(label),
            "start": float(start),
            "end": float(end),
            "probability": float(end) - float(start),
            "holds_u": i == chosen_index,
        }
        for i, (label, start, end) in enumerate(zip(labels, starts, ends))
    ]
    if other_label and len(ends) and ends[-1] < 1.0:
        rows.append(
            {
                "rank": None,
                "token": other_label,
                "start": float(ends[-1]),
                "end": 1.0,
                "probability": 1.0 - float(ends[-1]),
                "holds_u": chosen_index is None and u is not None,
            }
        )
    table = pd.DataFrame(rows)
    table["u"] = u
    return table


cumulative_ranges = Chart(make_cumulative_ranges, ranges_table)


def histogram_table(
    labels: Sequence[str], observed: Sequence[float], expected: Sequence[float], n_draws: int
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "token": [t if t.startswith("other (") else visible_token(t) for t in labels],
            "observed_frequency": list(observed),
            "observed_draws": [round(f * n_draws) for f in observed],
            "exact_probability": list(expected),
            "n_draws": n_draws,
        }
    )


draw_histogram = Chart(make_draw_histogram, histogram_table)


def histogram_chart(histogram: Histogram, who: str = "") -> ChartCall:
    """The ``draw_histogram`` chart of one ``Histogram``: a page's own draws, or a class's pooled ones."""
    gof = histogram.gof
    return draw_histogram(
        histogram.labels,
        histogram.observed.tolist(),
        histogram.expected.tolist(),
        histogram.n_draws,
        gof.statistic,
        gof.dof,
        gof.p_value,
        who=who,
    )


def strips_table(
    rows: Sequence[Sequence[str]],
    row_labels: Sequence[str],
    probabilities: Sequence[Sequence[float]],
    token_ids: Sequence[Sequence[int]],
) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "setting": label,
                "generated_token": i,
                "token_id": ids[i],
                "token": visible_token(token),
                "probability": float(probs[i]),
            }
            for label, tokens, probs, ids in zip(row_labels, rows, probabilities, token_ids)
            for i, token in enumerate(tokens)
        ]
    )


token_strips = Chart(make_token_strips, strips_table)  # the table also takes token_ids= (by name)
