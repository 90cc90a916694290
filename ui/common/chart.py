"""One spec per chart: the figure and its CSV table built from ONE argument list, so a column can't drift.

A chapter's ``figures.py`` pairs each pure ``make_*`` figure builder with the ``*_table`` builder of its CSV in a
module-level ``Chart``; a page calls the spec once, ``charts.show(figs.logits_bar(tokens, logits, greedy), key=...)``,
and ``ui.common.charts.show`` draws the figure and offers the table from those same arguments.

The arguments are routed by name: positional ones take the figure builder's parameter names in order, keyword ones
keep theirs, and each builder receives only the parameters it names. A title or a colour scale goes to the figure
alone; a column the figure does not draw (token ids, say) is passed by keyword and goes to the table alone. An
argument neither builder names is an error at the call, not a silently missing column. A spec without a table
falls back to the numbers read off the figure's traces (``ui.common.export.figure_csv``).

Pure: no Streamlit, so the pairing can be tested on hand-made inputs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common.export import figure_csv


def _parameter_names(builder: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(inspect.signature(builder).parameters)


@dataclass(frozen=True)
class Chart:
    """A figure builder and the table builder of its CSV, called together with one argument list."""

    figure: Callable[..., go.Figure]
    table: Callable[..., pd.DataFrame] | None = None
    figure_names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    table_names: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "figure_names", _parameter_names(self.figure))
        object.__setattr__(self, "table_names", _parameter_names(self.table) if self.table else ())

    @property
    def name(self) -> str:
        return self.figure.__name__.removeprefix("make_")

    def __call__(self, *args: Any, **kwargs: Any) -> ChartCall:
        if len(args) > len(self.figure_names):
            raise TypeError(f"{self.name}: {len(args)} positional arguments, the figure takes {len(self.figure_names)}")
        values = dict(zip(self.figure_names, args))
        twice = values.keys() & kwargs.keys()
        if twice:
            raise TypeError(f"{self.name}: {sorted(twice)} given both by position and by name")
        values |= kwargs
        unknown = values.keys() - {*self.figure_names, *self.table_names}
        if unknown:
            raise TypeError(f"{self.name}: neither the figure nor its table takes {sorted(unknown)}")
        return ChartCall(self, values)


@dataclass(frozen=True)
class ChartCall:
    """One chart's arguments, bound: ``figure()`` and ``table()`` each read the ones its builder names."""

    spec: Chart
    values: dict[str, Any]

    def figure_arguments(self) -> dict[str, Any]:
        return {name: self.values[name] for name in self.spec.figure_names if name in self.values}

    def figure(self, builder: Callable[..., go.Figure] | None = None) -> go.Figure:
        """The figure (``builder`` wraps the spec's own, such as a shared cache of it)."""
        return (builder or self.spec.figure)(**self.figure_arguments())

    def table(self) -> pd.DataFrame | None:
        """The CSV's table, or None where the spec has no table builder."""
        if self.spec.table is None:
            return None
        return self.spec.table(**{name: self.values[name] for name in self.spec.table_names if name in self.values})

    def csv(self, fig: go.Figure | None = None) -> str:
        """The CSV text: the table's, or the traces' of ``fig`` (built here when not given) where there is none."""
        frame = self.table()
        if frame is None:
            return figure_csv(fig if fig is not None else self.figure())
        return frame.to_csv(index=False, lineterminator="\n")


def plain(values: Any) -> list:
    """Values as Python numbers (an array's ``tolist()``), as a table's column: a float32 array written as Python
    floats, the same text in the CSV whether the caller passed an array or a list."""
    return values.tolist() if hasattr(values, "tolist") else list(values)


def ranked_table(
    token_texts: Sequence[str], columns: dict[str, Any], token_ids: Sequence[int] | None = None
) -> pd.DataFrame:
    """One row per token in the order given (most likely first): its rank from 1, its id where ``token_ids`` are
    given, its text as the chart shows it, then ``columns``."""
    table: dict[str, Any] = {"rank": range(1, len(token_texts) + 1)}
    if token_ids is not None:
        table["token_id"] = list(token_ids)
    return pd.DataFrame({**table, "token": list(token_texts), **columns})


def cell_table(
    values: np.ndarray,
    rows: str,
    columns: str,
    value: str,
    row_labels: tuple[str, Sequence[str]] | None = None,
    column_labels: tuple[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """A (rows, columns) matrix as a long table, one line per cell in row-major order (as a heatmap's cells): the
    row's index (then its label, where ``row_labels`` names them), the column's index (then its label), the value.
    The values keep their dtype, so the CSV writes the numbers the figure draws."""
    n_rows, n_columns = values.shape
    table = {rows: np.repeat(np.arange(n_rows), n_columns)}
    if row_labels is not None:
        table[row_labels[0]] = np.repeat(list(row_labels[1]), n_columns)
    table[columns] = np.tile(np.arange(n_columns), n_rows)
    if column_labels is not None:
        table[column_labels[0]] = np.tile(list(column_labels[1]), n_rows)
    table[value] = values.reshape(-1)
    return pd.DataFrame(table)
