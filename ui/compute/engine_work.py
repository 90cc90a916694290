"""The pages' forwards as functions of the engine, run where the operator's server runs them.

Owns ``run_on_engine`` (``fn(engine, ...)`` in the calling script thread, or in the
process server's child on a class server, ``LLM_EXPLORER_SERVER=process``) and the
functions it runs: the prompt's last-position logits (Logits, Sampling, the lens) and the
attention arrays of a traced forward (Attention). In the child a forward's hundreds of
torch calls do not wait for Python's lock behind twenty sessions' script threads
(``inference.serving.process``); the result comes back as plain arrays, the same numbers
(the child loads the same model with the same thread setting).

The functions below are plain torch/numpy (the child imports this module by name);
``run_on_engine`` looks the server up only in process mode.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch

from inference import Engine

T = TypeVar("T")


def run_on_engine(model: str, engine: Engine, fn: Callable[..., T], *args) -> T:
    """``fn(engine, *args)``: here, or on the process server's copy of ``model`` when the server runs in a
    process of its own."""
    from ui.shell.resources import server_for, server_mode

    if server_mode() == "process":
        return server_for(model).run(fn, *args)
    return fn(engine, *args)


def last_logits(engine: Engine, ids: list[int]) -> np.ndarray:
    """Logits (V,) of the last position of ``ids``: one forward without a cache."""
    return engine.recompute_last(ids).numpy().copy()


def attention_arrays(engine: Engine, ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(raw scores, attention probs, queries, keys) of every layer and head of one traced forward of ``ids``."""
    _, trace = engine.traced_forward(ids, last_only=True)  # the maps, not the logits
    with torch.inference_mode():
        raw = torch.stack([layer.raw_scores[0] for layer in trace.layers])  # (L, H, T, T)
        probs = torch.stack([layer.attention_probs[0] for layer in trace.layers])  # (L, H, T, T)
        queries = torch.stack([layer.queries[0] for layer in trace.layers])  # (L, H, T, hd)
        keys = torch.stack([layer.keys[0] for layer in trace.layers])  # (L, n_kv, T, hd)
    return raw.numpy().copy(), probs.numpy().copy(), queries.numpy().copy(), keys.numpy().copy()
