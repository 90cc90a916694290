"""What a session keeps between its runs: nothing big, and never a page's globals.

Streamlit keeps every session's state (its widgets' callbacks and ``format_func`` included) while the tab is open and
120 s after it closes, for a reconnect (``server.disconnectedSessionTTL``). A function defined in a page script and
handed to a widget keeps that page run's globals alive with it: its attention maps, its logits over the vocabulary
(1.0-1.4 MB a session for an 11-token prompt on SmolLM2 before these were mended; a class whose tabs came and went grew by ~80 MiB a round in
``scripts/bench_load.py``). Pages hand widgets module-level functions (``ui``'s) and lookups of small tables instead.
This walks everything reachable from a session's state and its fragments after each page's first run, the modules' own globals
excepted (they live once per process), and checks both.
"""

from __future__ import annotations

import gc
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from tests import apptest_utils

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(path.name for path in (ROOT / "pages").glob("*.py"))
# The Generation page's own walk (``state.GEN_STEPPER``) holds its KV cache by design, and reaches the shared engine.
OWN_WALK = {"generation.py"}
MOST_ARRAY_BYTES = 64 * 2**10  # numbers a session keeps: its few settings, never a chart's data
MOST_BYTES = 2**20  # everything else it keeps (widget states, small strings); measured 22-105 KiB a page


def _kept(roots: list[object]) -> tuple[int, int, list[str]]:
    """(bytes of arrays and tensors, bytes of everything else, the page functions) reachable from ``roots``."""
    shared = {id(module.__dict__) for module in list(sys.modules.values()) if module is not None}
    seen, stack = set(), list(roots)
    arrays = others = 0
    page_functions = []
    while stack:
        item = stack.pop()
        if id(item) in seen or id(item) in shared or isinstance(item, (types.ModuleType, type, torch.nn.Module)):
            continue
        seen.add(id(item))
        if isinstance(item, types.FunctionType) and Path(item.__code__.co_filename).parent == ROOT / "pages":
            page_functions.append(f"{item.__qualname__} ({Path(item.__code__.co_filename).name})")
        if isinstance(item, np.ndarray):
            arrays += item.nbytes if item.base is None else 0
        elif isinstance(item, torch.Tensor):
            arrays += item.untyped_storage().nbytes()
        else:
            others += sys.getsizeof(item, 0)
        stack.extend(gc.get_referents(item))
    return arrays, others, page_functions


@pytest.mark.parametrize("page", PAGES)
def test_a_session_keeps_no_page_globals_and_nothing_big(page):
    at = apptest_utils.open_page(f"pages/{page}")
    arrays, others, page_functions = _kept([at.session_state._state, at._fragment_storage])  # a session's own two
    assert not page_functions, f"the session keeps {page}'s globals through {page_functions}"
    if page not in OWN_WALK:
        assert arrays <= MOST_ARRAY_BYTES, f"{page}: the session keeps {arrays:,} bytes of arrays"
        assert others <= MOST_BYTES, f"{page}: the session keeps {others:,} bytes"
