"""Pure figure builders for the Transformer block & logit lens page.

``make_block_diagram`` draws one block as boxes and arrows with the residual stream's
size and norm at each stage; ``make_block_activations`` shows the vectors themselves;
``make_logit_lens`` is the layer × position heatmap of top-1 guesses;
``make_answer_formation`` follows the final answer's probability through the layers.
All take plain numbers and return a ``go.Figure``; each has a ``*_table`` beside it with
the same numbers under named columns, for the chart's CSV.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common import format as fmt
from ui.common.chart import Chart
from ui.common.conventions import fit_cells, fit_label
from ui.common.token_text import visible_token
from ui.common.traces import share_heatmap
from ui.logits.figures import GREEDY_COLOR

_ADD_FILL, _SUBLAYER_FILL, _PLAIN_FILL = "#fff2cc", "#dae8fc", "#f5f5f5"


def _fill(stage: str) -> str:
    if stage.startswith("residual add"):
        return _ADD_FILL
    return _PLAIN_FILL if stage == "block input" else _SUBLAYER_FILL


BOX_WIDTH = 0.84  # share of the plot's width a stage's box takes (its one-line label must fit: tests check it)
DIAGRAM_FONT_PX = 13
ROW_PX = 44  # height per stage


def block_label(stage: str, shape: tuple[int, int], norm: float) -> str:
    """A stage's one-line label: its name, the tensor's shape and the vector's length at one position."""
    return f"<b>{stage}</b> · {shape[0]} × {shape[1]} · ‖x‖ = {norm:.1f}"


def make_block_diagram(
    stage_names: Sequence[str], shape: tuple[int, int], norms: Sequence[float], title: str
) -> go.Figure:
    """One block drawn as architecture diagrams draw it: the stages stacked top to bottom, an arrow between each,
    every box one line wide enough for its label (stage name, tensor shape T × D, ‖x‖ at one position), so a
    block with four norms (Gemma's nine stages) fits as well as a pre-norm one."""
    fig = go.Figure()
    n = len(stage_names)
    left, right = (1 - BOX_WIDTH) / 2, (1 + BOX_WIDTH) / 2
    for i, (stage, norm) in enumerate(zip(stage_names, norms)):
        top = n - i  # the first stage at the top
        fig.add_shape(
            type="rect",
            x0=left,
            x1=right,
            y0=top - 0.78,
            y1=top,
            fillcolor=_fill(stage),
            line={"color": "#555", "width": 1.5},
            layer="below",
        )
        fig.add_annotation(
            x=0.5,
            y=top - 0.39,
            showarrow=False,
            align="center",
            font={"color": "#222", "size": DIAGRAM_FONT_PX},
            text=block_label(stage, shape, norm),
        )
        if i:
            fig.add_annotation(
                x=0.5,
                y=top,
                ax=0.5,
                ay=top + 0.22,
                xref="x",
                yref="y",
                axref="x",
                ayref="y",
                showarrow=True,
                arrowhead=2,
                arrowwidth=1.5,
                text="",
            )
    fig.update_xaxes(visible=False, range=[0, 1], fixedrange=True)
    fig.update_yaxes(visible=False, range=[0.1, n + 0.1], fixedrange=True)
    fig.update_layout(
        title=title,
        height=70 + ROW_PX * n,
        margin={"t": 50, "b": 10, "l": 10, "r": 10},
        plot_bgcolor="white",
        showlegend=False,
    )
    return fig


def make_block_activations(stage_names: Sequence[str], vectors: np.ndarray, n_dims: int = 96) -> go.Figure:
    """Heatmap of each stage's vector (rows) over its first ``n_dims`` dimensions, colour clipped at the 99th |x|."""
    values = np.asarray(vectors, dtype=np.float64)[:, :n_dims]  # (S, n_dims)
    limit = float(np.percentile(np.abs(values), 99)) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=values,
            y=list(stage_names),
            x=list(range(values.shape[1])),
            colorscale="RdBu",
            zmid=0,
            zmin=-limit,
            zmax=limit,
            colorbar={"title": "value"},
            hovertemplate="%{y}, dim %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(
        title=f"The vector itself at each stage (first {values.shape[1]} dimensions)",
        xaxis_title="dimension",
        height=330,
        margin={"t": 50, "b": 40},
    )
    return fig


def make_logit_lens(
    layer_labels: Sequence[str],
    position_tokens: Sequence[str],
    top_probs: np.ndarray,
    top_strings: Sequence[Sequence[Sequence[str]]],
) -> go.Figure:
    """Layers (rows, embeddings at the bottom) × prompt positions: the top-1 guess as text, its probability as colour.

    ``top_probs`` is (L, T, k) and ``top_strings`` (L, T, k) holds the k best guesses'
    texts; the hover shows all k.
    """
    probs = np.asarray(top_probs, dtype=np.float64)
    n_layers, n_pos = probs.shape[:2]
    guesses = [[cell_text(visible_token(top_strings[l][t][0])) for t in range(n_pos)] for l in range(n_layers)]
    size, drawn = fit_cells([g for row in guesses for g in row], n_pos, 12)  # no cell overflows, on a projector too
    text = [[drawn[g] for g in row] for row in guesses]
    hover = [
        [
            "<br>".join(f"{visible_token(s)}: {fmt.prob(p)}" for s, p in zip(top_strings[l][t], probs[l, t]))
            for t in range(n_pos)
        ]
        for l in range(n_layers)
    ]
    fig = go.Figure(
        share_heatmap(
            probs[:, :, 0],
            layer_labels,
            "Viridis",
            1,
            "p(top-1)",
            text=text,
            customdata=hover,
            texttemplate="%{text}",
            textfont={"size": size},
            hovertemplate="%{y}, after %{x}<br>%{customdata}<extra></extra>",
        )
    )
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(n_pos)),
        ticktext=[cell_text(visible_token(t)) for t in position_tokens],
        title="prompt position (its token)",
        side="bottom",
    )
    fig.update_layout(
        title="Logit lens: what each layer would predict next, at every position",
        height=max(420, 26 * n_layers + 140),
        margin={"t": 60, "b": 60},
    )
    return fig


CELL_CHARS = 7  # at most this many characters of a guess in its cell (the hover and the CSV have it whole)


def cell_text(text: str, limit: int = CELL_CHARS) -> str:
    return fit_label(text, limit)


def make_answer_formation(layer_labels: Sequence[str], probabilities: Sequence[float], token: str) -> go.Figure:
    """The probability the final answer ``token`` gets when each layer's stream is read out (last position)."""
    fig = go.Figure(
        go.Scatter(
            x=list(layer_labels),
            y=list(probabilities),
            mode="lines+markers",
            line={"color": GREEDY_COLOR},
            customdata=[fmt.prob(p) for p in probabilities],
            hovertemplate="%{x}: %{customdata}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"How the final answer {visible_token(token)!r} forms, layer by layer",
        yaxis={"title": "probability", "range": [0, 1.05]},
        height=300,
        margin={"t": 50, "b": 40},
    )
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------
def block_table(stage_names: Sequence[str], shape: tuple[int, int], norms: Sequence[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"stage": list(stage_names), "positions": shape[0], "d_model": shape[1], "norm_at_last_position": list(norms)}
    )


block_diagram = Chart(make_block_diagram, block_table)


def activations_table(stage_names: Sequence[str], vectors: np.ndarray, n_dims: int = 96) -> pd.DataFrame:
    values = np.asarray(vectors, dtype=np.float64)[:, :n_dims]  # (S, n_dims), as drawn
    s, d = values.shape
    return pd.DataFrame(
        {"stage": np.repeat(list(stage_names), d), "dimension": np.tile(np.arange(d), s), "value": values.reshape(-1)}
    )


block_activations = Chart(make_block_activations, activations_table)


def lens_table(
    layer_labels: Sequence[str],
    position_tokens: Sequence[str],
    top_probs: np.ndarray,
    top_strings: Sequence[Sequence[Sequence[str]]],
    first_position: int = 0,
) -> pd.DataFrame:
    """One row per (readout, position, rank): the guess and its probability (the heatmap shows rank 1)."""
    probs = np.asarray(top_probs, dtype=np.float64)
    rows = [
        {
            "layer": layer_labels[l],
            "position": first_position + t,
            "token_at_position": visible_token(token),
            "rank": k + 1,
            "guess": visible_token(top_strings[l][t][k]),
            "probability": float(probs[l, t, k]),
        }
        for l in range(probs.shape[0])
        for t, token in enumerate(position_tokens)
        for k in range(probs.shape[2])
    ]
    return pd.DataFrame(rows)


logit_lens = Chart(make_logit_lens, lens_table)  # the table also takes first_position= (by name)


def answer_table(layer_labels: Sequence[str], probabilities: Sequence[float], token: str) -> pd.DataFrame:
    return pd.DataFrame(
        {"layer": list(layer_labels), "token": visible_token(token), "probability": list(probabilities)}
    )


answer_formation = Chart(make_answer_formation, answer_table)
