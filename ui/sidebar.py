"""The shared sidebar, drawn once by ``app.py`` on every page: prompt, chat toggle, seed, model facts."""
from __future__ import annotations

import streamlit as st

from inference import Engine

from . import state


def model_facts(engine: Engine) -> dict[str, str]:
    """Name, family, device, dtype and parameter count of the loaded model, as display strings."""
    n_params = sum(p.numel() for p in engine.model.parameters())  # tied weights counted once
    config = engine.config
    return {
        "Model": config.name,
        "Architecture": f"{config.family}, {config.n_layers} layers, d_model {config.d_model}",
        "Device": str(engine.device),
        "Dtype": str(engine.dtype).removeprefix("torch."),
        "Parameters": f"{n_params / 1e6:.1f} M ({n_params:,})",
    }


def render(engine: Engine) -> None:
    """Draw the shared controls and the model card in the sidebar."""
    with st.sidebar:
        st.text_area(
            "Prompt", height=100, max_chars=20_000,
            help="Every page runs this text through the model. It carries across pages.",
            **state.bind(state.PROMPT),
        )
        st.toggle(
            "Chat template", help="Wrap the prompt as a user turn in the model's chat template.",
            **state.bind(state.CHAT),
        )
        st.number_input(
            "Seed", min_value=0, max_value=2**31 - 1, step=1,
            help="Seed for anything random (sampling, random projections).",
            **state.bind(state.SEED),
        )
        facts = model_facts(engine)
        st.caption("  \n".join(f"**{name}:** {value}" for name, value in facts.items()))
