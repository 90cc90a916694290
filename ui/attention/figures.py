"""Figures for the Attention page: heatmaps, the all-heads grid, one query's score steps, K/V sharing, the window.

Each ``make_*`` builder has a ``*_table`` beside it: the same numbers with named columns,
for the chart's CSV download (masked future keys are left out: their weight is exactly 0).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common import format as fmt
from ui.common.chart import Chart, cell_table
from ui.common.conventions import shared_colour_top
from ui.common.subplots import grid_figure
from ui.common.token_text import visible

MASKED_COLOUR = "#d9d9d9"  # cells a query may not see (future keys) are left empty on this background


def _labels(pieces: list[str]) -> list[str]:
    return [f"{i}: {visible(p)}" for i, p in enumerate(pieces)]


def _causal(probs: np.ndarray, window: int | None = None) -> np.ndarray:
    """Copy of a (T, T) map with the masked cells (the future; keys outside a ``window``) set to NaN,
    so they draw as background."""
    rows, cols = np.triu_indices(probs.shape[-1], k=1)
    out = probs.astype(float).copy()
    out[..., rows, cols] = np.nan
    if window is not None:
        rows, cols = np.tril_indices(probs.shape[-1], k=-window)
        out[..., rows, cols] = np.nan
    return out


def make_attention_heatmap(probs: np.ndarray, pieces: list[str], title: str, window: int | None = None) -> go.Figure:
    """Query (rows) × key (columns) attention weights, grey where masked (the future, and keys outside a
    local layer's ``window``), row sums beside it."""
    labels = _labels(pieces)
    shown = _causal(probs, window)
    weights = [[fmt.prob(w, 4) if np.isfinite(w) else "masked" for w in row] for row in shown]
    heatmap = {
        "type": "heatmap",
        "z": shown,
        "x": labels,
        "y": labels,
        "zmin": 0,
        "zmax": 1,
        "colorscale": "Blues",
        "customdata": weights,
        "colorbar": {"title": {"text": "weight"}, "x": 1.02},
        "hovertemplate": "query %{y}<br>key %{x}<br>weight %{customdata}<extra></extra>",
    }
    sums = probs.sum(axis=-1)
    row_sums = {
        "type": "bar",
        "x": sums,
        "y": labels,
        "orientation": "h",
        "marker": {"color": "#9ecae1"},
        "text": [f"{s:.3f}" for s in sums],
        "textposition": "inside",
        "textfont": {"size": 12},
        "hovertemplate": "%{y}: Σ = %{x:.6f}<extra></extra>",
        "showlegend": False,
    }
    fig = grid_figure(
        {
            "rows": 1,
            "cols": 2,
            "column_widths": [0.88, 0.12],
            "horizontal_spacing": 0.02,
            "shared_yaxes": True,
            "subplot_titles": ["", "row sum"],
        },
        [(heatmap, 1, 1), (row_sums, 1, 2)],
        {
            (1, 1): (
                {"type": "category", "tickangle": -60, "title": {"text": "key (attended to)"}},
                {"autorange": "reversed", "type": "category"},
            ),
            (1, 2): ({"range": [0, 1.05], "showticklabels": False}, {}),
        },
        {
            "title": {"text": title},
            "height": max(360, 120 + 24 * len(pieces)),
            "plot_bgcolor": MASKED_COLOUR,
            "yaxis": {"title": {"text": "query (attending)"}},
            "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
        },
    )
    return fig


def make_heads_grid(
    probs: np.ndarray, pieces: list[str], kv_groups: list[int], layer: int, window: int | None = None
) -> go.Figure:
    """All heads of one layer, (H, T, T), tiled into one heatmap (one trace draws far faster than H subplots).

    Each tile is titled with its head and the K/V head it shares; hovering names head, query and key.
    """
    n_heads, t, _ = probs.shape
    cols = int(np.ceil(np.sqrt(n_heads)))
    rows = int(np.ceil(n_heads / cols))
    gap = 1 if t < 16 else max(1, t // 16)
    step = t + gap
    mosaic = np.full((rows * step - gap, cols * step - gap), np.nan)
    detailed_hover = t <= 24  # per-cell hover labels; for long prompts they would weigh megabytes
    info = np.full(mosaic.shape, "", dtype=object)
    labels = [visible(p) for p in pieces]
    annotations = []
    for h in range(n_heads):
        r, c = divmod(h, cols)
        mosaic[r * step : r * step + t, c * step : c * step + t] = _causal(probs[h], window)
        for q in range(t if detailed_hover else 0):
            for k in range(t):
                weight = probs[h, q, k]
                info[r * step + q, c * step + k] = (
                    f"head {h}<br>query {q}: {labels[q]}<br>key {k}: {labels[k]}<br>"
                    f"weight {fmt.prob(weight) if k <= q else 'masked'}"
                )
        annotations.append(
            dict(
                x=c * step + (t - 1) / 2,
                y=r * step - 0.5,
                yanchor="bottom",
                showarrow=False,
                text=f"head {h} · K/V head {kv_groups[h]}",
                font=dict(size=12),
            )
        )
    mosaic_trace = {
        "type": "heatmap",
        "z": mosaic,
        "zmin": 0,
        "zmax": 1,
        "colorscale": "Blues",
        "colorbar": {"title": {"text": "weight"}},
        "hovertemplate": "%{customdata}<extra></extra>" if detailed_hover else "weight %{z:.3~g}<extra></extra>",
    }
    if detailed_hover:
        mosaic_trace["customdata"] = info
    layout = {  # made with the figure (one validation, no relayouts)
        "xaxis": {"visible": False, "constrain": "domain"},
        "yaxis": {"visible": False, "autorange": "reversed", "scaleanchor": "x"},
        "title": {"text": f"Layer {layer}: every head (blank upper triangles = future keys, masked)"},
        "annotations": annotations,
        "height": 260 * rows,
        "plot_bgcolor": "white",
        "margin": {"l": 10, "r": 10, "t": 70, "b": 10},
    }
    fig = go.Figure(data=[mosaic_trace], layout=layout)
    return fig


def make_score_steps(
    raw: np.ndarray,
    scaled: np.ndarray,
    masked: np.ndarray,
    probs: np.ndarray,
    pieces: list[str],
    query: int,
    head_dim: float,
) -> go.Figure:
    """Four stacked bar charts for one query: q·k → ÷√d → causal mask → softmax (``head_dim``: the d in √d)."""
    labels = _labels(pieces)
    visible_keys = np.isfinite(masked)
    titles = [
        "1. q·k (raw dot products)",
        f"2. ÷ √{head_dim:g} = ÷ {np.sqrt(head_dim):.3g}",
        "3. mask (future keys → −∞)",
        f"4. softmax → weights (sum {probs.sum():.4f})",
    ]
    colours = ["#9c755f", "#f28e2b", "#e15759", "#4e79a7"]
    traces = [
        (
            {
                "type": "bar",
                "x": labels,
                "y": values,
                "marker": {"color": colour},
                "showlegend": False,
                "text": [("−∞" if row == 3 and not visible_keys[i] else f"{v:.3g}") for i, v in enumerate(values)],
                "textposition": "outside",
                "cliponaxis": False,
                "hovertemplate": "key %{x}<br>%{y:.5f}<extra></extra>",
            },
            row,
            1,
        )
        for row, (values, colour) in enumerate(
            zip((raw, scaled, np.where(visible_keys, masked, np.nan), probs), colours), 1
        )
    ]
    hidden = [label for label, ok in zip(labels, visible_keys) if not ok]
    minus_infinity = {
        "type": "scatter",
        "x": hidden,
        "y": [0.0] * len(hidden),
        "mode": "text",
        "text": ["−∞"] * len(hidden),
        "textposition": "top center",
        "showlegend": False,
        "hoverinfo": "skip",
    }
    fig = grid_figure(
        {"rows": 4, "cols": 1, "shared_xaxes": True, "vertical_spacing": 0.06, "subplot_titles": titles},
        [*traces, (minus_infinity, 3, 1)],
        {(row, 1): ({"type": "category", "tickangle": -60}, {}) for row in range(1, 5)},
        {
            "title": {"text": f"Query {labels[query]}: from scores to attention weights"},
            "height": 820,
            "margin": {"l": 40, "r": 10, "t": 80, "b": 10},
        },
    )
    return fig


def make_query_over_layers(weights: np.ndarray, pieces: list[str], query: int) -> go.Figure:
    """Layers (rows) × keys (columns): where one query looks, averaged over heads, layer by layer."""
    labels = _labels(pieces)
    layers = {
        "type": "heatmap",
        "z": weights,
        "x": labels,
        "y": [f"layer {i}" for i in range(weights.shape[0])],
        "zmin": 0,
        "zmax": 1,
        "colorscale": "Blues",
        "customdata": [[fmt.prob(w) for w in row] for row in weights],
        "colorbar": {"title": {"text": "mean weight"}},
        "hovertemplate": "%{y}<br>key %{x}<br>%{customdata}<extra></extra>",
    }
    layout = {  # made with the figure (one validation, no relayouts)
        "title": {"text": f"Where {labels[query]} looks, layer by layer (mean over heads)"},
        "xaxis": {"type": "category", "tickangle": -60},
        "yaxis": {"autorange": "reversed"},
        "height": max(420, 40 + 18 * weights.shape[0]),
        "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
    }
    fig = go.Figure(data=[layers], layout=layout)
    return fig


def make_gqa_diagram(n_heads: int, n_kv_heads: int) -> go.Figure:
    """Query heads (top) wired to the K/V heads they share (bottom)."""
    per_group = n_heads // n_kv_heads
    q_x = np.arange(n_heads, dtype=float)
    kv_x = np.array([g * per_group + (per_group - 1) / 2 for g in range(n_kv_heads)])
    fig = go.Figure()
    for h in range(n_heads):
        fig.add_trace(
            go.Scatter(
                x=[q_x[h], kv_x[h // per_group]],
                y=[1, 0],
                mode="lines",
                line=dict(color="#bbb"),
                hoverinfo="skip",
                showlegend=False,
            )
        )
    heads = (  # (x, y, label prefix, label position, marker, legend name): the query row, then the K/V row
        (q_x, 1.0, "Q", "top center", dict(size=16, color="#4e79a7"), "query heads"),
        (kv_x, 0.0, "K/V", "bottom center", dict(size=22, color="#f28e2b", symbol="square"), "K/V heads"),
    )
    for x, y, prefix, position, marker, name in heads:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=np.full(len(x), y),
                mode="markers+text",
                text=[f"{prefix}{i}" for i in range(len(x))],
                textposition=position,
                marker=marker,
                name=name,
            )
        )
    kind = (
        "Multi-head attention"
        if n_kv_heads == n_heads
        else "Multi-query attention"
        if n_kv_heads == 1
        else "Grouped-query attention"
    )
    fig.update_layout(
        title=f"{kind}: {n_heads} query heads share {fmt.count(n_kv_heads, 'K/V head')}",
        xaxis=dict(visible=False),
        yaxis=dict(visible=False, range=[-0.5, 1.5]),
        height=240,
        margin=dict(l=10, r=10, t=50, b=10),
        legend=dict(orientation="h"),
    )
    return fig


def _window_shown(pooled: np.ndarray, block: int, window: int, local: bool) -> np.ndarray:
    """The pooled map as drawn: the future, and in a ``local`` layer the cells wholly behind the window, NaN."""
    cells = pooled.shape[-1]
    rows, cols = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
    shown = pooled.astype(float).copy()
    shown[cols > rows] = np.nan  # the future
    if local:  # cells whose every key is outside every one of their queries' windows
        shown[(cols + 1) * block - 1 <= rows * block - window] = np.nan
    return shown


def window_colour_top(maps: list[tuple[np.ndarray, int, int, bool]]) -> float:
    """One colour-scale top for window maps drawn side by side (a local and a global layer), so equal weights get
    equal colours: the highest 99th percentile of what each map draws. ``maps``: (pooled, block, window, local)."""
    return shared_colour_top(*(_window_shown(*m) for m in maps))


def make_window_heatmap(
    pooled: np.ndarray, block: int, n_tokens: int, window: int, title: str, local: bool, colour_top: float | None = None
) -> go.Figure:
    """A long prompt's head-averaged attention, max-pooled into ``block`` x ``block`` cells, with the
    sliding window drawn: left of the dashed line, keys are ``window`` or more positions behind their
    query; in a ``local`` layer those cells are masked (grey, like the future). The colour scale stops
    at ``colour_top`` (shared with the map beside it: ``window_colour_top``), by default this map's 99th
    percentile, so the first token's large share does not wash out the rest."""
    cells = pooled.shape[-1]
    centres = (np.arange(cells) + 0.5) * block  # position at the middle of each pooled cell
    shown = _window_shown(pooled, block, window, local)
    top = colour_top if colour_top is not None else shared_colour_top(shown)
    fig = go.Figure(
        go.Heatmap(
            z=shown,
            x=centres,
            y=centres,
            zmin=0,
            zmax=top,
            colorscale="Blues",
            colorbar=dict(title="max weight"),
            hovertemplate=f"queries %{{y:.0f}}±{block // 2}<br>keys %{{x:.0f}}±{block // 2}<br>max weight %{{z:.4f}}<extra></extra>",
        )
    )
    edge = np.array([window - 1, n_tokens - 1])  # query positions from the first that loses a key
    fig.add_trace(
        go.Scatter(
            x=edge - window + 1,
            y=edge,
            mode="lines",
            line=dict(color="#d62728", dash="dash", width=2),
            name=f"window edge: {window} keys back",
            hoverinfo="skip",
        )
    )
    fig.update_xaxes(title="key position", range=[0, n_tokens], constrain="domain")
    fig.update_yaxes(title="query position", range=[n_tokens, 0], constrain="domain")
    fig.update_layout(
        title=title,
        height=520,
        plot_bgcolor=MASKED_COLOUR,
        margin=dict(l=10, r=10, t=60, b=10),
        legend=dict(orientation="h", y=-0.15),
    )
    return fig


def make_layer_kinds(local_layers: list[int], n_layers: int, window: int) -> go.Figure:
    """One cell per layer: local (sliding window) or global."""
    kinds = [1.0 if i in local_layers else 0.0 for i in range(n_layers)]
    text = [f"{i}<br>{'local' if k else 'global'}" for i, k in enumerate(kinds)]
    fig = go.Figure(
        go.Heatmap(
            z=[kinds],
            x=list(range(n_layers)),
            text=[text],
            texttemplate="%{text}",
            colorscale=[[0, "#f28e2b"], [1, "#9ecae1"]],
            showscale=False,
            xgap=2,
            hovertemplate="layer %{x}<extra></extra>",
        )
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(
        title=f"Layer by layer: local (sees the last {window} keys) or global (sees every key)",
        height=150,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------
def attention_table(probs: np.ndarray, pieces: list[str]) -> pd.DataFrame:
    """One row per visible (query, key) cell of one head: its attention weight."""
    labels = [visible(p) for p in pieces]
    queries, keys = np.tril_indices(probs.shape[-1])
    return pd.DataFrame(
        {
            "query_position": queries,
            "query_token": [labels[q] for q in queries],
            "key_position": keys,
            "key_token": [labels[k] for k in keys],
            "weight": probs[queries, keys],
        }
    )


attention_heatmap = Chart(make_attention_heatmap, attention_table)


def score_steps_table(
    raw: np.ndarray, scaled: np.ndarray, masked: np.ndarray, probs: np.ndarray, pieces: list[str]
) -> pd.DataFrame:
    """One query's four steps for every key (a future key's masked score is -inf)."""
    return pd.DataFrame(
        {
            "key_position": range(len(raw)),
            "key_token": [visible(p) for p in pieces],
            "q_dot_k": raw,
            "scaled": scaled,
            "after_mask": masked,
            "weight": probs,
        }
    )


score_steps = Chart(make_score_steps, score_steps_table)


def heads_table(probs: np.ndarray, pieces: list[str], kv_groups: list[int]) -> pd.DataFrame:
    """Every head of one layer: one row per head and visible (query, key) cell."""
    frames = [attention_table(probs[h], pieces).assign(head=h, kv_head=kv_groups[h]) for h in range(probs.shape[0])]
    table = pd.concat(frames, ignore_index=True)
    return table[["head", "kv_head", "query_position", "query_token", "key_position", "key_token", "weight"]]


heads_grid = Chart(make_heads_grid, heads_table)


def gqa_table(n_heads: int, n_kv_heads: int) -> pd.DataFrame:
    per_group = n_heads // n_kv_heads
    return pd.DataFrame({"query_head": range(n_heads), "kv_head": [h // per_group for h in range(n_heads)]})


gqa_diagram = Chart(make_gqa_diagram, gqa_table)


def query_layers_table(weights: np.ndarray, pieces: list[str]) -> pd.DataFrame:
    """One query's mean weight (over heads) on each key, layer by layer."""
    return cell_table(
        weights, "layer", "key_position", "mean_weight", column_labels=("key_token", [visible(p) for p in pieces])
    )


query_over_layers = Chart(make_query_over_layers, query_layers_table)


def window_table(pooled: np.ndarray, block: int, window: int, local: bool) -> pd.DataFrame:
    """The pooled map of a long prompt: one row per visible block of (query, key) positions."""
    cells = pooled.shape[-1]
    rows, cols = np.tril_indices(cells)
    outside = (cols + 1) * block - 1 <= rows * block - window  # every key of the cell behind the window
    return pd.DataFrame(
        {
            "query_from": rows * block,
            "key_from": cols * block,
            "block": block,
            "max_weight": pooled[rows, cols].astype(float),
            "behind_window": outside,
            "masked": outside & local,
        }
    )


window_heatmap = Chart(make_window_heatmap, window_table)


def layer_kinds_table(local_layers: list[int], n_layers: int, window: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "layer": range(n_layers),
            "kind": ["local" if i in local_layers else "global" for i in range(n_layers)],
            "keys_seen": [f"last {window}" if i in local_layers else "all" for i in range(n_layers)],
        }
    )


layer_kinds = Chart(make_layer_kinds, layer_kinds_table)
