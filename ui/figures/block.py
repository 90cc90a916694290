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

from ui.figures.logits import GREEDY_COLOR, visible_token

_ADD_FILL, _SUBLAYER_FILL, _PLAIN_FILL = "#fff2cc", "#dae8fc", "#f5f5f5"


def _fill(stage: str) -> str:
    if stage.startswith("residual add"):
        return _ADD_FILL
    return _PLAIN_FILL if stage == "block input" else _SUBLAYER_FILL


def make_block_diagram(stage_names: Sequence[str], shape: tuple[int, int], norms: Sequence[float],
                       title: str) -> go.Figure:
    """One block as a left-to-right chain of boxes: stage name, tensor shape (T × D) and ‖x‖ at one position."""
    fig = go.Figure()
    box_w, gap = 1.0, 0.35
    narrow = len(stage_names) > 6  # a block with four norms: names on two lines, to fit their boxes
    for i, (stage, norm) in enumerate(zip(stage_names, norms)):
        x0 = i * (box_w + gap)
        fig.add_shape(type="rect", x0=x0, x1=x0 + box_w, y0=0, y1=1, fillcolor=_fill(stage),
                      line={"color": "#555", "width": 1.5}, layer="below")
        name = stage.replace(" ", "<br>", 1) if narrow else stage
        fig.add_annotation(x=x0 + box_w / 2, y=0.5, showarrow=False, align="center", font={"color": "#222"},
                           text=f"<b>{name}</b><br>{shape[0]} × {shape[1]}<br>‖x‖ = {norm:.1f}")
        if i:
            fig.add_annotation(x=x0, y=0.5, ax=x0 - gap, ay=0.5, xref="x", yref="y", axref="x", ayref="y",
                               showarrow=True, arrowhead=2, arrowwidth=1.5, text="")
    total = len(stage_names) * (box_w + gap) - gap
    fig.update_xaxes(visible=False, range=[-0.05, total + 0.05])
    fig.update_yaxes(visible=False, range=[-0.1, 1.1])
    fig.update_layout(title=title, height=210, margin={"t": 50, "b": 10, "l": 10, "r": 10},
                      plot_bgcolor="white", showlegend=False)
    return fig


def make_block_activations(stage_names: Sequence[str], vectors: np.ndarray, n_dims: int = 96) -> go.Figure:
    """Heatmap of each stage's vector (rows) over its first ``n_dims`` dimensions, colour clipped at the 99th |x|."""
    values = np.asarray(vectors, dtype=np.float64)[:, :n_dims]  # (S, n_dims)
    limit = float(np.percentile(np.abs(values), 99)) or 1.0
    fig = go.Figure(go.Heatmap(
        z=values, y=list(stage_names), x=list(range(values.shape[1])), colorscale="RdBu", zmid=0,
        zmin=-limit, zmax=limit, colorbar={"title": "value"},
        hovertemplate="%{y}, dim %{x}: %{z:.3f}<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=f"The vector itself at each stage (first {values.shape[1]} dimensions)",
                      xaxis_title="dimension", height=330, margin={"t": 50, "b": 40})
    return fig


def make_logit_lens(layer_labels: Sequence[str], position_tokens: Sequence[str], top_probs: np.ndarray,
                    top_strings: Sequence[Sequence[Sequence[str]]]) -> go.Figure:
    """Layers (rows, embeddings at the bottom) × prompt positions: the top-1 guess as text, its probability as colour.

    ``top_probs`` is (L, T, k) and ``top_strings`` (L, T, k) holds the k best guesses'
    texts; the hover shows all k.
    """
    probs = np.asarray(top_probs, dtype=np.float64)
    n_layers, n_pos = probs.shape[:2]
    text = [[cell_text(visible_token(top_strings[l][t][0])) for t in range(n_pos)] for l in range(n_layers)]
    hover = [["<br>".join(f"{visible_token(s)}: {p:.3f}" for s, p in zip(top_strings[l][t], probs[l, t]))
              for t in range(n_pos)] for l in range(n_layers)]
    fig = go.Figure(go.Heatmap(
        z=probs[:, :, 0], x=list(range(n_pos)), y=list(layer_labels), text=text, customdata=hover,
        texttemplate="%{text}", textfont={"size": 12}, colorscale="Viridis", zmin=0, zmax=1, xgap=1, ygap=1,
        colorbar={"title": "p(top-1)"}, hovertemplate="%{y}, after %{x}<br>%{customdata}<extra></extra>",
    ))
    fig.update_xaxes(tickmode="array", tickvals=list(range(n_pos)),
                     ticktext=[cell_text(visible_token(t)) for t in position_tokens], title="prompt position (its token)",
                     side="bottom")
    fig.update_layout(title="Logit lens: what each layer would predict next, at every position",
                      height=max(420, 26 * n_layers + 140), margin={"t": 60, "b": 60})
    return fig


CELL_CHARS = 7  # a longer guess is cut in its cell (the hover and the CSV have it whole), so cells never overlap


def cell_text(text: str, limit: int = CELL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def make_answer_formation(layer_labels: Sequence[str], probabilities: Sequence[float], token: str) -> go.Figure:
    """The probability the final answer ``token`` gets when each layer's stream is read out (last position)."""
    fig = go.Figure(go.Scatter(x=list(layer_labels), y=list(probabilities), mode="lines+markers",
                               line={"color": GREEDY_COLOR}, hovertemplate="%{x}: %{y:.3f}<extra></extra>"))
    fig.update_layout(title=f"How the final answer {visible_token(token)!r} forms, layer by layer",
                      yaxis={"title": "probability", "range": [0, 1.05]}, height=300, margin={"t": 50, "b": 40})
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------
def block_table(stage_names: Sequence[str], shape: tuple[int, int], norms: Sequence[float]) -> pd.DataFrame:
    return pd.DataFrame({"stage": list(stage_names), "positions": shape[0], "d_model": shape[1],
                         "norm_at_last_position": list(norms)})


def activations_table(stage_names: Sequence[str], vectors: np.ndarray, n_dims: int = 96) -> pd.DataFrame:
    values = np.asarray(vectors, dtype=np.float64)[:, :n_dims]  # (S, n_dims), as drawn
    s, d = values.shape
    return pd.DataFrame({"stage": np.repeat(list(stage_names), d), "dimension": np.tile(np.arange(d), s),
                         "value": values.reshape(-1)})


def lens_table(layer_labels: Sequence[str], position_tokens: Sequence[str], top_probs: np.ndarray,
               top_strings: Sequence[Sequence[Sequence[str]]], first_position: int = 0) -> pd.DataFrame:
    """One row per (readout, position, rank): the guess and its probability (the heatmap shows rank 1)."""
    probs = np.asarray(top_probs, dtype=np.float64)
    rows = [{"layer": layer_labels[l], "position": first_position + t, "token_at_position": visible_token(token),
             "rank": k + 1, "guess": visible_token(top_strings[l][t][k]), "probability": float(probs[l, t, k])}
            for l in range(probs.shape[0]) for t, token in enumerate(position_tokens) for k in range(probs.shape[2])]
    return pd.DataFrame(rows)


def answer_table(layer_labels: Sequence[str], probabilities: Sequence[float], token: str) -> pd.DataFrame:
    return pd.DataFrame({"layer": list(layer_labels), "token": visible_token(token), "probability": list(probabilities)})
