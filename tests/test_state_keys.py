"""The session's keys live in one registry (``ui/common/state.py``): no literal key anywhere else in the UI, and
the pure computations (each chapter's ``compute.py``) keep no session state and draw nothing but a spinner.

What counts as using a session key: indexing ``st.session_state`` (``[...]``, ``.get``, ``.pop``,
``.setdefault``, ``in``), a widget's ``key=``, the first argument of ``state.bind`` / ``state.get`` /
``state.put``, the keys of a dict given to ``state.set_values``, and ``args=`` of a callback that writes the
session (``on_click=st.session_state.__setitem__`` or ``state.put``). A chart's or a table's ``key=`` names
the element (and a chart's files), not a value, and is written where it is drawn.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = "ui/common/state.py"
WIDGETS = {
    "text_input",
    "text_area",
    "number_input",
    "slider",
    "select_slider",
    "selectbox",
    "multiselect",
    "radio",
    "checkbox",
    "toggle",
    "data_editor",
    "button",
    "download_button",
    "color_picker",
    "date_input",
    "time_input",
    "file_uploader",
    "pills",
    "segmented_control",
    "feedback",
    "chat_input",
    "form",
}


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _session(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "session_state"


def literal_keys(source: str) -> list[str]:
    """Every literal session key ``source`` uses, as ``line: text``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        hits = []
        if isinstance(node, ast.Subscript) and _session(node.value):
            hits.append(node.slice)
        elif isinstance(node, ast.Compare) and any(_session(c) for c in node.comparators):
            hits.append(node.left)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, owner = node.func.attr, node.func.value
            if _session(owner) and name in ("get", "pop", "setdefault", "__setitem__", "__getitem__") and node.args:
                hits.append(node.args[0])
            if name in WIDGETS:
                hits += [k.value for k in node.keywords if k.arg == "key"]
            if getattr(owner, "id", None) == "state" and name in ("bind", "get", "put") and node.args:
                hits.append(node.args[0])
            if (
                getattr(owner, "id", None) == "state"
                and name == "set_values"
                and node.args
                and isinstance(node.args[0], ast.Dict)
            ):
                hits += node.args[0].keys
            for keyword in node.keywords:
                writes = keyword.arg == "on_click" and (
                    (isinstance(keyword.value, ast.Attribute) and _session(keyword.value.value))
                    or ast.unparse(keyword.value) in ("state.put", "state.set_values")
                )
                if writes:
                    args = next((k.value for k in node.keywords if k.arg == "args"), None)
                    if isinstance(args, ast.Tuple) and args.elts:
                        hits.append(args.elts[0])
                    if isinstance(args, ast.Tuple) and args.elts and isinstance(args.elts[0], ast.Dict):
                        hits += args.elts[0].keys
        for node_hit in hits:
            if _literal(node_hit):
                found.append(f"{node_hit.lineno}: {ast.unparse(node_hit)}")
    return found


def _ui_files() -> list[Path]:
    return sorted((ROOT / "ui").rglob("*.py")) + sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]


def test_no_literal_session_key_outside_the_registry():
    offenders = [
        f"{path.relative_to(ROOT)}:{hit}"
        for path in _ui_files()
        if str(path.relative_to(ROOT)) != REGISTRY
        for hit in literal_keys(path.read_text())
    ]
    assert not offenders, offenders


def test_the_check_finds_every_kind_of_literal_key():
    planted = """
import streamlit as st
st.session_state["a"] = 1
st.session_state.get("b")
"c" in st.session_state
st.button("Go", key="d")
st.slider("T", key=f"e_{page}")
state.bind("f", 0)
state.set_values({"g": 1})
st.button("Go", key=state.GO, on_click=st.session_state.__setitem__, args=("h", True))
st.button("Go", key=state.GO, on_click=state.set_values, args=({"i": 2},))
charts.show(fig, key="a_chart")  # a chart's key names the chart: not a session key
st.session_state[state.FINE] = state.get(state.FINE)
"""
    assert [hit.split(": ")[1] for hit in literal_keys(planted)] == [
        "'a'",
        "'b'",
        "'c'",
        "'d'",
        "f'e_{page}'",
        "'f'",
        "'g'",
        "'h'",
        "'i'",
    ]


def test_the_registry_defines_each_key_once():
    from ui.common import state

    keys = {
        name: value
        for name, value in vars(state).items()
        if name.isupper() and isinstance(value, str) and name not in ("DEFAULT_PROMPT",)
    }
    values = list(keys.values())
    assert len(values) == len(set(values)), sorted(v for v in values if values.count(v) > 1)


def test_the_pure_computations_keep_no_session_state_and_draw_nothing():
    """A chapter's ``compute.py`` (and the other number modules) is cached helpers over plain values: the session
    and the page belong to the controls, the links and the pages. A spinner while a result is computed is all it
    draws."""
    allowed = {"cache_data", "cache_resource", "spinner"}
    offenders = []
    numbers = ("compute.py", "frames.py", "reference.py", "own_text.py", "examples.py", "blocks.py", "draws.py")
    for path in sorted(p for p in (ROOT / "ui").rglob("*.py") if p.name in numbers):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "st"
                and node.attr not in allowed
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: st.{node.attr}")
    assert not offenders, offenders
