"""Pure figure builders for the experiments (the Experiments page, and the Attention page's switched-off heads).

``make_before_after`` compares the next-token distribution with and without the
intervention; ``make_lens_with_region`` is the logit lens after it, with the region the
edit can reach shaded and the cells whose top guess changed outlined;
``make_head_importance`` and ``make_patching`` are the sweeps' heatmaps;
``make_attribution`` the direct logit attribution as bars. Plain numbers in, ``go.Figure`` out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common import format as fmt
from ui.common.chart import Chart, cell_table
from ui.common.token_text import visible_token
from ui.common.traces import share_heatmap
from ui.logit_lens.figures import lens_table, make_logit_lens

BEFORE_COLOR, AFTER_COLOR = "#9ecae1", "#e6550d"
DIM_COLOR = "rgba(255, 255, 255, 0.6)"  # drawn over the cells an edit cannot reach


def make_before_after(token_strings: Sequence[str], before: np.ndarray, after: np.ndarray, title: str) -> go.Figure:
    """Grouped bars: each token's next-token probability without (before) and with (after) the intervention."""
    labels = [visible_token(t) for t in token_strings]
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    fig = go.Figure(
        [
            go.Bar(
                x=labels,
                y=before,
                name="before",
                marker_color=BEFORE_COLOR,
                customdata=[fmt.prob(p, 4) for p in before],
                hovertemplate="%{x}: p = %{customdata} before<extra></extra>",
            ),
            go.Bar(
                x=labels,
                y=after,
                name="after",
                marker_color=AFTER_COLOR,
                customdata=[f"{fmt.prob(a, 4)} (Δp {fmt.signed(a - b, 4)})" for a, b in zip(after, before)],
                hovertemplate="%{x}: p = %{customdata} after<extra></extra>",
            ),
        ]
    )
    fig.update_layout(
        title=title,
        barmode="group",
        yaxis_title="probability",
        xaxis_title="next token",
        xaxis={"type": "category"},
        height=360,
        margin={"t": 60, "b": 40},
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
    )
    return fig


def make_lens_with_region(
    layer_labels: Sequence[str],
    position_tokens: Sequence[str],
    top_probs: np.ndarray,
    top_strings,
    region: tuple[int, int] | None,
    changed: np.ndarray,
) -> go.Figure:
    """The logit lens after the intervention: the cells it cannot reach dimmed (a white veil over them), the block
    it can reach outlined, changed top guesses marked with a square.

    ``region`` is (first row, first column) of the reachable block (rows: embeddings, then
    each block's output); ``changed`` (rows, columns) marks cells whose top-1 differs from before.
    """
    fig = make_logit_lens(layer_labels, position_tokens, top_probs, top_strings)
    n_rows, n_cols = np.asarray(top_probs).shape[:2]
    if region is not None and region[0] < n_rows and region[1] < n_cols:
        row, col = region
        veils = [(-0.5, n_cols - 0.5, -0.5, row - 0.5), (-0.5, col - 0.5, row - 0.5, n_rows - 0.5)]
        for x0, x1, y0, y1 in veils:  # below the reachable rows, and left of its columns
            if x1 > x0 and y1 > y0:
                fig.add_shape(
                    type="rect", x0=x0, x1=x1, y0=y0, y1=y1, xref="x", yref="y", fillcolor=DIM_COLOR, line={"width": 0}
                )
        fig.add_shape(
            type="rect",
            x0=col - 0.5,
            x1=n_cols - 0.5,
            y0=row - 0.5,
            y1=n_rows - 0.5,
            xref="x",
            yref="y",
            line={"color": AFTER_COLOR, "width": 3},
        )
    rows, cols = np.nonzero(np.asarray(changed, dtype=bool))
    fig.add_trace(
        go.Scatter(
            x=cols.tolist(),
            y=[layer_labels[r] for r in rows],
            mode="markers",
            name="top guess changed",
            marker={"symbol": "square-open", "size": 22, "color": AFTER_COLOR, "line": {"width": 2}},
            hovertemplate="%{y}, after %{x}: top guess changed<extra></extra>",
        )
    )
    fig.update_layout(
        title="Logit lens with the intervention: it can reach only the outlined block (the rest is "
        "dimmed); a square = top guess changed",
        showlegend=False,
    )
    return fig


def make_head_importance(delta: np.ndarray, target_text: str, action: str) -> go.Figure:
    """Layer (rows) × head (columns): change in log p(target) when that head alone is changed."""
    values = np.asarray(delta, dtype=float)
    limit = float(np.abs(values).max()) or 1.0
    n_layers, n_heads = values.shape
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=[f"head {h}" for h in range(n_heads)],
            y=list(range(n_layers)),
            colorscale="RdBu",
            zmid=0,
            zmin=-limit,
            zmax=limit,
            colorbar={"title": "Δ log p"},
            xgap=1,
            ygap=1,
            hovertemplate="layer %{y}, %{x}: Δ log p = %{z:+.4f}<extra></extra>",
        )
    )
    fig.update_yaxes(title="layer", autorange="reversed", dtick=1 if n_layers <= 12 else 2)
    fig.update_layout(
        title=f"Head importance: change in log p({visible_token(target_text)}) with each head {action}",
        height=max(360, 18 * n_layers + 140),
        margin={"t": 60, "b": 40},
    )
    return fig


def make_patching(restored: np.ndarray, position_tokens: Sequence[str], answers: tuple[str, str]) -> go.Figure:
    """Layer (rows) × position: share of the clean answer restored by patching the clean stream there."""
    values = np.asarray(restored, dtype=float)
    n_layers, n_pos = values.shape
    fig = go.Figure(
        share_heatmap(
            values,
            range(n_layers),
            "Viridis",
            1,
            "restored",
            hovertemplate="after block %{y}, position %{x}: %{z:.1%} restored<extra></extra>",
        )
    )
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(n_pos)),
        ticktext=[visible_token(t) for t in position_tokens],
        title="position patched (its clean token)",
    )
    fig.update_yaxes(title="stream after block", autorange="reversed", dtick=1 if n_layers <= 12 else 2)
    clean, corrupt = (visible_token(a) for a in answers)
    fig.update_layout(
        title=f"Activation patching: how much of {clean} over {corrupt} each patch restores",
        height=max(360, 18 * n_layers + 140),
        margin={"t": 60, "b": 60},
    )
    return fig


def make_attribution(labels: Sequence[str], values: np.ndarray, target_text: str, top_n: int = 20) -> go.Figure:
    """Horizontal bars of the ``top_n`` largest terms (by size) of the target's logit, largest on top."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(-np.abs(values), kind="stable")[:top_n]
    shown = [labels[i] for i in order][::-1]
    fig = go.Figure(
        go.Bar(
            x=values[order][::-1],
            y=shown,
            orientation="h",
            marker_color=[AFTER_COLOR if v > 0 else BEFORE_COLOR for v in values[order][::-1]],
            hovertemplate="%{y}: %{x:+.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Direct logit attribution: the {len(order)} largest terms of the logit of {visible_token(target_text)}",
        xaxis_title="contribution to the logit",
        yaxis={"type": "category"},
        height=max(360, 22 * len(order) + 120),
        margin={"t": 60, "b": 40},
    )
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------
def before_after_table(token_strings: Sequence[str], before: np.ndarray, after: np.ndarray) -> pd.DataFrame:
    """The shown tokens' probabilities without and with the intervention."""
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    return pd.DataFrame(
        {
            "token": [visible_token(t) for t in token_strings],
            "p_before": before,
            "p_after": after,
            "delta_p": after - before,
        }
    )


before_after = Chart(make_before_after, before_after_table)


def lens_region_table(
    layer_labels: Sequence[str],
    position_tokens: Sequence[str],
    top_probs: np.ndarray,
    top_strings,
    region: tuple[int, int] | None,
    changed: np.ndarray,
) -> pd.DataFrame:
    """The logit lens after the intervention, with whether each cell can be reached and whether its top guess changed."""
    table = lens_table(layer_labels, position_tokens, top_probs, top_strings)  # rows in (readout, position, rank) order
    n_rows, n_cols, k = np.asarray(top_probs).shape
    index = np.arange(len(table))
    rows, cols = index // (n_cols * k), (index // k) % n_cols
    table["reachable"] = (rows >= region[0]) & (cols >= region[1]) if region is not None else False
    table["top_changed"] = np.asarray(changed, dtype=bool)[rows, cols]
    return table


lens_with_region = Chart(make_lens_with_region, lens_region_table)


def head_importance_table(delta: np.ndarray) -> pd.DataFrame:
    """Change in the target's log-probability with each head edited, one row per (layer, head)."""
    return cell_table(np.asarray(delta, dtype=float), "layer", "head", "delta_log_p")


head_importance = Chart(make_head_importance, head_importance_table)


def patching_table(restored: np.ndarray, position_tokens: Sequence[str]) -> pd.DataFrame:
    """Share of the clean answer each patch restores, one row per (block, position)."""
    tokens = [visible_token(t) for t in position_tokens]
    return cell_table(
        np.asarray(restored, dtype=float), "after_block", "position", "restored", column_labels=("token", tokens)
    )


patching = Chart(make_patching, patching_table)


def attribution_table(labels: Sequence[str], values: np.ndarray) -> pd.DataFrame:
    """Every term of the direct logit attribution (not only the largest the chart draws)."""
    return pd.DataFrame({"term": list(labels), "contribution": np.asarray(values, dtype=float)})


attribution = Chart(make_attribution, attribution_table)
