"""The Overview picture on screen: an SVG (``ui.overview.figures``) whose parts open their pages when clicked.

A Streamlit ``components.v2`` element: the browser shows the SVG it is given and, when a part is
clicked (or focused and Enter pressed), sends that part's page back; ``render`` returns it and the
page switches there within the same session, so the prompt, model and settings stay. No library,
nothing fetched; the page's own links below the picture reach the same pages without a script.
"""

from __future__ import annotations

import streamlit as st

KEY = "overview_picture"
_JS = """
export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  let root = parentElement.querySelector(".ov-root");
  if (!root) {
    root = document.createElement("div");
    root.className = "ov-root";
    parentElement.appendChild(root);
  }
  if (root.__svg !== data.svg) {
    root.innerHTML = data.svg;
    root.__svg = data.svg;
    for (const part of root.querySelectorAll(".ov-part")) {
      const open = (event) => { event.stopPropagation(); setTriggerValue("open", part.dataset.page); };
      part.addEventListener("click", open);
      part.addEventListener("keydown", (event) => { if (event.key === "Enter" || event.key === " ") open(event); });
    }
  }
}
"""
_CSS = """
:host { display: block; width: 100%; }
.ov-root { display: block; width: 100%; max-width: 1100px; }
.ov-svg { width: 100%; height: auto; font-family: "Source Sans Pro", system-ui, sans-serif; }
.ov-card { fill: #fbfcfd; stroke: #c7ccd3; stroke-width: 1.5; }
.ov-part { cursor: pointer; outline: none; }
.ov-part:hover .ov-card, .ov-part:focus .ov-card { stroke: #ff4b4b; stroke-width: 2.5; }
.ov-part:hover > text, .ov-part:focus > text { fill: #c0262d; }
.ov-title { font-size: 18px; font-weight: 700; fill: #262730; }
.ov-body, .ov-mono { font-size: 17px; fill: #262730; }
.ov-mono { font-family: "Source Code Pro", ui-monospace, monospace; }
.ov-chip { font-size: 14px; font-family: "Source Code Pro", ui-monospace, monospace; fill: #262730; }
.ov-note { font-size: 14px; fill: #555b66; }
.ov-small { font-size: 13px; fill: #262730; }
.ov-loop { font-size: 14px; fill: #555b66; font-style: italic; }
.ov-arrow { stroke: #555; stroke-width: 2; }
"""
_component = st.components.v2.component("overview_picture", js=_JS, css=_CSS)


def render(svg: str) -> str | None:
    """Draw ``svg``; the url path of the page a click asked for (``data-page``), or None."""
    result = _component(key=KEY, data={"svg": svg}, on_open_change=lambda: None)
    return getattr(result, "open", None)
