"""Pure figure builders for the Generation & KV cache page.

Plain lists and numpy arrays in, ``go.Figure`` (or an HTML string) out: the growing
sequence, one step's alternatives, the K/V tensors of one layer with the row written
this step outlined, cached vs uncached step times, and the prefill/decode timeline.
Each figure has a ``*_table`` beside it: its numbers under named columns, for the CSV.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common import format as fmt
from ui.common.chart import Chart, ranked_table
from ui.common.conventions import shared_range
from ui.common.subplots import subplots
from ui.tokenization.figures import chip_html, chips_html, visible

PROMPT_COLOR, SAMPLED_COLOR, FORCED_COLOR = "#e9ecef", "#cfe2ff", "#ffd8a8"
CACHED_COLOR, UNCACHED_COLOR = "#1f77b4", "#d62728"
PHASE_COLORS = {"prefill": "#6f42c1", "decode": "#20c997"}


def sequence_html(prompt_pieces: Sequence[str], chosen_pieces: Sequence[str], forced: Sequence[bool]) -> str:
    """The prompt (grey) followed by the chosen tokens (blue, or orange when forced), step numbers below."""
    chips = [chip_html(p, PROMPT_COLOR, "prompt") for p in prompt_pieces]
    chips += [
        chip_html(p, FORCED_COLOR if f else SAMPLED_COLOR, f"step {i}{' ✎' if f else ''}")
        for i, (p, f) in enumerate(zip(chosen_pieces, forced))
    ]
    return chips_html(chips, line_height=2.4)


def make_alternatives_bar(
    tokens: Sequence[str], probs: Sequence[float], chosen: str, title: str, value_range: Sequence[float] | None = None
) -> go.Figure:
    """The model's top candidates at one step (softmax at T = 1), the chosen token outlined, bars from zero.

    ``value_range``: the probability axis, shared with a chart drawn beside this one (``shared_range``)."""
    labels = [visible(t) or "∅" for t in tokens]
    colors = [SAMPLED_COLOR if t == chosen else "#dee2e6" for t in tokens]
    fig = go.Figure(
        go.Bar(
            x=list(probs),
            y=labels,
            orientation="h",
            marker_color=colors,
            marker_line_color=["#0d6efd" if t == chosen else "#adb5bd" for t in tokens],
            marker_line_width=2,
            text=[fmt.pct(p, 1) for p in probs],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: p = %{customdata}<extra></extra>",
            customdata=[fmt.prob(p, 4) for p in probs],
        )
    )
    fig.update_layout(
        title=title,
        height=80 + 32 * len(tokens),
        margin=dict(l=10, r=40, t=60, b=10),
        xaxis=dict(title="probability", range=list(value_range or shared_range(probs))),
        yaxis=dict(autorange="reversed", type="category"),
    )
    return fig


def make_kv_heatmaps(
    keys: np.ndarray, values: np.ndarray, labels: Sequence[str], new_rows: Sequence[int], layer: int
) -> go.Figure:
    """K and V of one layer, (n_kv, positions, head_dim) each: one column per K/V head, K above V.

    The rows written by the last forward are outlined in red; the rest were reused from the cache.
    """
    n_kv, n_pos, head_dim = keys.shape
    titles = [f"K, head {h}" for h in range(n_kv)] + [f"V, head {h}" for h in range(n_kv)]
    fig = subplots(
        rows=2, cols=n_kv, subplot_titles=titles, shared_yaxes=True, vertical_spacing=0.12, horizontal_spacing=0.03
    )
    ticks = [f"{i}: {visible(t)}" for i, t in enumerate(labels)]
    outlines = []  # every outline written once at the end: add_shape re-validates all earlier ones on each call
    for row, tensor in ((1, keys), (2, values)):
        limit = float(max(np.abs(tensor).max(initial=0), 1e-6))  # K and V each on their own scale
        for head in range(n_kv):
            fig.add_trace(
                go.Heatmap(
                    z=tensor[head],
                    y=ticks,
                    x=list(range(head_dim)),
                    zmid=0,
                    zmin=-limit,
                    zmax=limit,
                    colorscale="RdBu_r",
                    showscale=head == 0,
                    colorbar=dict(title="K" if row == 1 else "V", len=0.45, y=0.78 if row == 1 else 0.22),
                    hovertemplate="position %{y}<br>dim %{x}<br>%{z:.3f}<extra></extra>",
                ),
                row=row,
                col=head + 1,
            )
            axes = fig.get_subplot(row, head + 1)  # this cell's axes: xaxis3 is referred to as "x3"
            xref, yref = (axis.plotly_name.replace("axis", "") for axis in (axes.xaxis, axes.yaxis))
            outlines += [
                dict(
                    type="rect",
                    x0=-0.5,
                    x1=head_dim - 0.5,
                    y0=position - 0.5,
                    y1=position + 0.5,
                    xref=xref,
                    yref=yref,
                    line=dict(color="red", width=2),
                )
                for position in new_rows
            ]
    fig.update_layout(shapes=outlines)
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=ticks, ticktext=ticks)
    fig.update_xaxes(title_text="head dimension", row=2)
    fig.update_layout(
        title=f"Layer {layer}: the cache's keys and values ({n_pos} positions × {head_dim} dims "
        f"per K/V head); red = written this step",
        height=max(360, 2 * (80 + 14 * n_pos)),
        margin=dict(l=10, r=10, t=70, b=40),
    )
    return fig


def make_cache_timing(
    context_lengths: Sequence[int], cached_ms: Sequence[float], uncached_ms: Sequence[float]
) -> go.Figure:
    """Time per generated token with the KV cache (one new position) and without (the whole sequence again)."""
    series = (
        ("no cache: recompute all", uncached_ms, UNCACHED_COLOR),
        ("KV cache: one new position", cached_ms, CACHED_COLOR),
    )
    fig = go.Figure(
        [
            go.Scatter(x=list(context_lengths), y=list(ms), mode="lines+markers", name=name, line=dict(color=colour))
            for name, ms, colour in series
        ]
    )
    fig.update_layout(
        title="Measured time per generated token as the sequence grows",
        xaxis_title="tokens in the sequence",
        yaxis_title="milliseconds per token",
        height=380,
        margin=dict(l=10, r=10, t=50, b=40),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def make_phase_timeline(
    phases: Sequence[str], seconds: Sequence[float], tokens_in: Sequence[int], labels: Sequence[str]
) -> go.Figure:
    """Each forward as a bar on a time axis: the prefill reads the whole prompt, each decode one token."""
    starts = np.concatenate([[0.0], np.cumsum(seconds)[:-1]]) * 1000 if len(seconds) else np.array([])
    fig = go.Figure()
    for phase, color in PHASE_COLORS.items():
        rows = [i for i, p in enumerate(phases) if p == phase]
        if not rows:
            continue
        fig.add_trace(
            go.Bar(
                base=[starts[i] for i in rows],
                x=[seconds[i] * 1000 for i in rows],
                y=[phase] * len(rows),
                orientation="h",
                name=phase,
                marker_color=color,
                marker_line_color="white",
                marker_line_width=1,
                customdata=[[tokens_in[i], visible(labels[i])] for i in rows],
                hovertemplate="%{customdata[0]} token(s) in → %{customdata[1]}<br>%{x:.1f} ms<extra></extra>",
            )
        )
    fig.update_layout(
        title="Prefill once, then one decode step per token (measured)",
        barmode="overlay",
        xaxis_title="sum of the step times so far, ms (forward + sampling; the time between your "
        "clicks is not counted)",
        height=240,
        margin=dict(l=10, r=10, t=50, b=50),
        showlegend=False,
    )
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------
def alternatives_table(
    token_ids: Sequence[int], tokens: Sequence[str], probs: Sequence[float], chosen_id: int
) -> pd.DataFrame:
    columns = {"probability_T1": list(probs), "chosen": [i == chosen_id for i in token_ids]}
    return ranked_table([visible(t) for t in tokens], columns, token_ids)


alternatives_bar = Chart(
    make_alternatives_bar, alternatives_table
)  # the table also takes token_ids=, chosen_id= (by name)


def kv_table(keys: np.ndarray, values: np.ndarray, labels: Sequence[str], first_position: int = 0) -> pd.DataFrame:
    """One row per (tensor, K/V head, position, dimension) of one layer's cache."""
    n_kv, n_pos, head_dim = keys.shape
    frames = []
    for name, tensor in (("K", keys), ("V", values)):
        frames.append(
            pd.DataFrame(
                {
                    "tensor": name,
                    "kv_head": np.repeat(np.arange(n_kv), n_pos * head_dim),
                    "position": np.tile(np.repeat(np.arange(first_position, first_position + n_pos), head_dim), n_kv),
                    "token": np.tile(np.repeat([visible(t) for t in labels], head_dim), n_kv),
                    "dimension": np.tile(np.arange(head_dim), n_kv * n_pos),
                    "value": tensor.reshape(-1),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


kv_heatmaps = Chart(make_kv_heatmaps, kv_table)  # the table also takes first_position= (by name)


def timing_table(
    context_lengths: Sequence[int], cached_ms: Sequence[float], uncached_ms: Sequence[float]
) -> pd.DataFrame:
    return pd.DataFrame(
        {"tokens_in_sequence": list(context_lengths), "kv_cache_ms": list(cached_ms), "recompute_ms": list(uncached_ms)}
    )


cache_timing = Chart(make_cache_timing, timing_table)


def timeline_table(
    phases: Sequence[str], seconds: Sequence[float], tokens_in: Sequence[int], labels: Sequence[str]
) -> pd.DataFrame:
    starts = np.concatenate([[0.0], np.cumsum(seconds)[:-1]]) * 1000 if len(seconds) else np.array([])
    return pd.DataFrame(
        {
            "step": range(len(phases)),
            "phase": list(phases),
            "tokens_in": list(tokens_in),
            "token_out": [visible(t) for t in labels],
            "start_ms_sum_of_steps": starts,
            "step_ms": [1000 * s for s in seconds],
        }
    )


phase_timeline = Chart(make_phase_timeline, timeline_table)
