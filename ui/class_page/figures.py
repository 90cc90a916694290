"""Pure figure builders for the class view: the class's guesses against the model's next-token probabilities.

(The pooled draws reuse ``ui.sampling.figures.make_draw_histogram``.) Every function takes plain
lists/numbers and returns a ``go.Figure``; ``guesses_table`` gives the same numbers for the CSV.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from ui.common.chart import Chart
from ui.common.token_text import visible_token
from ui.logits.figures import compared_bars, reference_bars


def percent(value: float) -> str:
    """A share or probability as a bar label: "50%", "7.1%", "0.4%", "<0.1%" (never a rounded-away "0%")."""
    if value >= 0.095:
        return f"{value:.0%}"
    if value >= 0.001:
        return f"{value:.1%}"
    return "<0.1%" if value > 0 else "0%"


def make_guesses(
    labels: Sequence[str],
    class_share: Sequence[float],
    model_prob: Sequence[float],
    n_guesses: int,
    temperature: float = 1.0,
) -> go.Figure:
    """Share of the class that guessed each token next to the model's probability of it at ``temperature`` (the
    temperature ``model_prob`` was computed at), both labelled in %."""
    x = list(range(len(labels)))
    fig = go.Figure(
        [
            reference_bars(
                x,
                model_prob,
                f"the model's probability (T = {temperature:g})",
                text=[percent(p) for p in model_prob],
                textposition="outside",
                cliponaxis=False,
                textfont={"size": 10},
                hovertemplate="p = %{y:.4f}<extra></extra>",
            ),
            compared_bars(
                x,
                class_share,
                f"share of the class's {n_guesses:,} guesses",
                [percent(v) if v else "" for v in class_share],
                textfont={"size": 10},
                hovertemplate="%{y:.0%}<extra></extra>",
            ),
        ]
    )
    fig.update_xaxes(tickmode="array", tickvals=x, ticktext=[visible_token(t) for t in labels])
    fig.update_layout(
        barmode="group",
        title=f"The class's guesses ({n_guesses:,}) vs the model's next token",
        yaxis={"title": "share / probability", "rangemode": "tozero"},
        height=410,
        # room for the legend on two rows under the title: in the Class page's narrow column it wraps
        legend={"orientation": "h", "y": 1.0, "x": 0, "xanchor": "left", "yanchor": "bottom"},
        margin={"t": 110, "b": 40},
    )
    return fig


def guesses_table(
    labels: Sequence[str],
    class_share: Sequence[float],
    model_prob: Sequence[float],
    temperature: float = 1.0,
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "token": list(labels),
            "class_share": list(class_share),
            "model_probability": list(model_prob),
            "temperature": temperature,
        }
    )


guesses = Chart(make_guesses, guesses_table)
