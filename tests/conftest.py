"""Shared fixtures: one real engine for the whole session, tiny random models for the rest."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def engine():
    """The embedded SmolLM2-135M-Instruct, fp32 on CPU, loaded once for every test that needs it."""
    from inference import load_engine

    return load_engine(device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def hf_reference(engine):
    """transformers' own model on the same weights (read from the engine's converted folder)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(engine.folder), dtype=torch.float32)
    return model.eval()


def pytest_collection_modifyitems(items):
    """Every test that uses the real engine is a ``real_model`` test, marked or not."""
    for item in items:
        if "engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_model)
