"""The shared sidebar, drawn once by ``app.py`` on every page: prompt, presenter toggle, share link, model, seed."""

from __future__ import annotations

import streamlit as st

from inference.api import EngineClient
from ui.common import models, state

# A button that copies the address bar (kept current by ``ui.session.links.publish``, fragments included).
# Clipboard API where the page is a secure context (localhost, https), the older copy command elsewhere
# (a class server reached over plain http on the school network). System fonts only: nothing is fetched.
COPY_LINK_HTML = """<div style="font-family: system-ui, sans-serif; font-size: 14px;">
<button id="copy" style="font: inherit; padding: 6px 12px; border-radius: 8px; cursor: pointer;
  border: 1px solid rgba(49, 51, 63, 0.25); background: white; color: rgb(49, 51, 63);">Copy link to this view</button>
<span id="done" style="margin-left: 8px; color: rgb(33, 195, 84);"></span></div>
<script>
const done = document.getElementById("done");
document.getElementById("copy").addEventListener("click", async () => {
  const url = window.parent.location.href;
  try {
    await navigator.clipboard.writeText(url);
  } catch (error) {
    const area = document.createElement("textarea");
    area.value = url; document.body.appendChild(area); area.select();
    document.execCommand("copy"); area.remove();
  }
  done.textContent = "Copied";
  setTimeout(() => { done.textContent = ""; }, 2000);
});
</script>"""


def model_facts(client: EngineClient) -> dict[str, str]:
    """Name, family, device, dtype and parameter count of the loaded model, as display strings."""
    n_params = client.info.parameter_count
    config = client.info.config
    local = len(config.local_layers)
    return {
        "Model": config.name,
        "Architecture": f"{config.family}, {config.n_layers} layers, d_model {config.d_model}",
        "Attention": (
            f"{config.n_heads} query heads share {config.n_kv_heads} K/V head"
            f"{'s' * (config.n_kv_heads > 1)}"
            + (
                f"; {local} local layers (window {config.sliding_window}), {config.n_layers - local} global"
                if local
                else ""
            )
        ),
        "Device": client.info.device,
        "Weights": client.info.weights_description,
        "Parameters": f"{n_params / 1e6:.1f} M ({n_params:,})",
        **({"Decode step": step.line} if (step := client.info.step_status) is not None else {}),
    }


def render(client: EngineClient) -> None:
    """Draw the shared controls in the sidebar; presenter mode keeps the prompt, the toggle and the copy button."""
    presenting = bool(state.get(state.PRESENTER))
    with st.sidebar:
        st.text_area(
            "Prompt",
            height=100,
            max_chars=20_000,
            help="Every page runs this text through the model. It carries across pages.",
            **state.bind(state.PROMPT),
        )
        st.toggle(
            "Presenter mode",
            help="For a projector: bigger text and charts, fewer controls, and "
            "Previous / Next buttons in the story's order. The link's `present=1` turns it on.",
            **state.bind(state.PRESENTER),
        )
        # The button's script needs a frame of its own (st.html runs no script); same origin, so it reads the address bar.
        st.iframe(COPY_LINK_HTML, height=44, alt="Copy link to this view")
        if presenting:
            return
        st.caption(
            "The address bar always holds this view: page, prompt and settings. Opening it shows the same numbers."
        )
        offered = list(models.allowlist())
        if len(offered) > 1:
            st.selectbox(
                "Model",
                offered,
                help="The models this server offers.",
                **state.bind(models.MODEL, models.default_name(), options=offered),
            )
        for name, hint in models.missing().items():
            st.caption(f"**{name}** is not installed on this server: {hint}.")
        has_template = client.tokenizer.chat_template is not None
        if not has_template and state.get(state.CHAT):
            state.set_values({state.CHAT: False})  # this model (a base model) has no template to apply
        st.toggle(
            "Chat template",
            disabled=not has_template,
            help="Wrap the prompt as a user turn in the model's chat template."
            if has_template
            else f"{client.info.config.name} has no chat template (a base model): the prompt is read as plain text.",
            **state.bind(state.CHAT),
        )
        st.number_input(
            "Seed",
            min_value=0,
            max_value=2**31 - 1,
            step=1,
            help="Seed for anything random (sampling, random projections).",
            **state.bind(state.SEED),
        )
        facts = model_facts(client)
        st.caption("  \n".join(f"**{name}:** {value}" for name, value in facts.items()))
