"""The session's experiment: which heads, attention edges and MLPs are changed, and how, shared by the pages.

Owns the session keys of the intervention the learner builds (the Attention page's
"Switch off this head" and the Experiments page both edit ``HEADS``), their defaults,
the plain, hashable ``Settings`` every cached helper is keyed by, and the text forms a
link carries (``off=13.8,3.8``, ``cut=7-1``, ``mlp_off=2,5``) with their strict parsers.
No torch here: ``Settings.spec()`` builds the engine's ``Interventions`` on demand.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from inference.api import EdgeCut, HeadEdit, Interventions, MLPEdit, number_text
from ui.common import state

# The experiment's session keys (``ui.common.state``), by the names this module's users know them by
HEADS, HEAD_MODE, HEAD_FACTOR = state.EXP_HEADS, state.EXP_HEAD_MODE, state.EXP_HEAD_FACTOR
EDGES, MLPS, MLP_FACTOR, TARGET = state.EXP_EDGES, state.EXP_MLPS, state.EXP_MLP_FACTOR, state.EXP_TARGET
CLEAN, CORRUPT, SWEEP, PATCHING = state.EXP_CLEAN, state.EXP_CORRUPT, state.EXP_SWEEP, state.EXP_PATCHING

HEAD_MODES = {
    "zero": "switch off (output = 0)",
    "mean": "replace by its mean over the prompt",
    "scale": "scale by a factor",
}
FACTOR_RANGE = (-1.0, 3.0)  # slider range of both scale factors
FACTOR_STEP = 0.1
MAX_ITEMS = 64  # heads, edges or MLPs a link may carry
MAX_LIST_CHARS = 512
MAX_INDEX = 999_999  # a layer, head or position in a link (six digits)
DEFAULT_CLEAN = "The cat sat on the mat because it was tired, so the"
DEFAULT_CORRUPT = "The dog sat on the mat because it was tired, so the"
EXAMPLE_PROMPT = DEFAULT_CLEAN  # the sidebar prompt the Experiments page suggests

DEFAULTS = {
    HEADS: (),
    HEAD_MODE: "zero",
    HEAD_FACTOR: 0.0,
    EDGES: (),
    MLPS: (),
    MLP_FACTOR: 0.0,
    TARGET: "",
    CLEAN: DEFAULT_CLEAN,
    CORRUPT: DEFAULT_CORRUPT,
    SWEEP: False,
    PATCHING: False,
}


@dataclass(frozen=True)
class Settings:
    """One experiment as plain, hashable values (a cache key); ``spec()`` is the engine's form."""

    heads: tuple[tuple[int, int], ...] = ()
    head_mode: str = "zero"
    head_factor: float = 0.0
    edges: tuple[tuple[int, int], ...] = ()
    mlps: tuple[int, ...] = ()
    mlp_factor: float = 0.0

    @property
    def empty(self) -> bool:
        return not (self.heads or self.edges or self.mlps)

    def spec(self) -> Interventions:
        """The ``Interventions`` (raises ``InterventionError`` when an edit does not fit)."""
        return Interventions(
            heads=tuple(HeadEdit(layer, head, self.head_mode, self.head_factor) for layer, head in self.heads),
            edges=tuple(EdgeCut(query, key) for query, key in self.edges),
            mlps=tuple(MLPEdit(layer, self.mlp_factor) for layer in self.mlps),
        )

    def heads_only(self) -> Settings:
        """Just the switched-off heads, zeroed (what the Attention page shows)."""
        return Settings(heads=self.heads)


def init() -> None:
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, value)


def current() -> Settings:
    """The session's experiment."""
    init()
    get = st.session_state.get
    return Settings(
        tuple(get(HEADS)),
        get(HEAD_MODE),
        float(get(HEAD_FACTOR)),
        tuple(get(EDGES)),
        tuple(get(MLPS)),
        float(get(MLP_FACTOR)),
    )


def set_heads(heads: list[tuple[int, int]]) -> None:
    """Button callback: the changed heads, sorted, without repeats."""
    st.session_state[HEADS] = tuple(sorted(set((int(l), int(h)) for l, h in heads)))


def add_heads(heads: list[tuple[int, int]]) -> None:
    """Button callback: ``heads`` changed beside the heads changed at the press (a button still on screen from an
    earlier run must not drop a head changed since it was drawn)."""
    set_heads([*st.session_state.get(HEADS, ()), *heads])


def add_head(layer: int, head: int) -> None:
    add_heads([(layer, head)])


def remove_head(layer: int, head: int) -> None:
    set_heads([pair for pair in st.session_state.get(HEADS, ()) if pair != (layer, head)])


# -- the link's text forms -----------------------------------------------------------------
def format_heads(heads) -> str:
    return ",".join(f"{layer}.{head}" for layer, head in heads)


def format_edges(edges) -> str:
    return ",".join(f"{query}-{key}" for query, key in edges)


def format_layers(layers) -> str:
    return ",".join(str(layer) for layer in layers)


def _items(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def _pair(item: str, sep: str) -> tuple[int, int] | None:
    try:
        return number_text.whole_pair(item, sep, low=0, high=MAX_INDEX)
    except number_text.NumberError:
        return None


def parse_heads(raw: str, n_layers: int, n_heads: int) -> tuple[tuple[tuple[int, int], ...], list[str]]:
    """``"13.8,3.8"`` -> ((3, 8), (13, 8)); malformed and out-of-range items are left out, each named once."""
    kept, bad = [], []
    for item in _items(raw):
        pair = _pair(item, ".")
        if pair is None or pair[0] >= n_layers or pair[1] >= n_heads:
            bad.append(item)
        else:
            kept.append(pair)
    return tuple(sorted(set(kept)))[:MAX_ITEMS], bad


def parse_edges(raw: str, n_tokens: int) -> tuple[tuple[tuple[int, int], ...], list[str]]:
    """``"7-1"`` -> ((7, 1),): query 7 may not look at key 1; needs key < query < the prompt's length."""
    kept, bad = [], []
    for item in _items(raw):
        pair = _pair(item, "-")
        if pair is None or not pair[1] < pair[0] < n_tokens:
            bad.append(item)
        else:
            kept.append(pair)
    return tuple(sorted(set(kept)))[:MAX_ITEMS], bad


def parse_layers(raw: str, n_layers: int) -> tuple[tuple[int, ...], list[str]]:
    kept, bad = [], []
    for item in _items(raw):
        try:
            kept.append(number_text.whole(item, low=0, high=n_layers - 1))
        except number_text.NumberError:
            bad.append(item)
    return tuple(sorted(set(kept)))[:MAX_ITEMS], bad
