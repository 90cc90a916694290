"""The compiled one-graph decode step on tiny random Gemma 3 (an 8-key window on layer 0, multi-query attention, its
own local RoPE base) in every mode: the same checks as ``tests/test_decode_step.py`` runs on Llama (alone past the
window, through speculation, in static and continuous batches), with the same bounds.

A file of its own because each family's three compiles are most of the suite's longest file: the test command hands
whole files to its two workers, so the two families compile side by side instead of one after the other.
"""

from __future__ import annotations

import pytest

from tests.test_decode_step import (  # noqa: F401 (the fixture and the tests run here on Gemma's engines)
    MODES,
    compiled_pair,
    pytestmark,
    step_cache,
    test_compiled_batches_equal_solo,
    test_compiled_paged_steps_equal_solo,
    test_compiled_solo_equals_eager_past_the_window,
    test_speculation_through_the_compiled_step_equals_eager_plain,
)

FAMILY = "gemma3"


@pytest.fixture(scope="module", params=[(FAMILY, m) for m in MODES], ids=lambda p: f"{p[0]}-{p[1]}")
def engines(request, step_cache):  # noqa: F811 (step_cache: the imported fixture)
    return compiled_pair(*request.param, step_cache)


@pytest.fixture(scope="module")
def paged_engines(step_cache):  # noqa: F811 (step_cache: the imported fixture)
    return compiled_pair(FAMILY, "float32", step_cache, graphs=("paged",))
