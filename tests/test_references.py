"""llama.cpp as the benchmark's reference (``inference.bench.references``) is timed on the same work as our engine.

Our prefill computes the last position's logits only (``last_only``); llama.cpp's, kept with ``logits_all`` for
the accuracy table, would also run the 49,152-row output matrix at every other prompt position and copy each row
out. The prefill must ask for the last position only, and leave every position's logits for ``logits`` after.
"""

from __future__ import annotations

import numpy as np
import pytest

from inference.bench.references import LlamaCppReference


class _RecordingLlama:
    """What ``LlamaCppReference`` calls on ``llama_cpp.Llama``, recording the switch each eval ran under."""

    def __init__(self) -> None:
        self._logits_all = True
        self.evals: list[tuple[int, bool]] = []

    def reset(self) -> None:
        pass

    def eval(self, ids: list[int]) -> None:
        self.evals.append((len(ids), self._logits_all))


def _reference_on(llm) -> LlamaCppReference:
    reference = LlamaCppReference.__new__(LlamaCppReference)  # the methods alone, on the given Llama
    reference.llm = llm
    return reference


def test_the_prefill_asks_llama_cpp_for_the_last_logits_only():
    llm = _RecordingLlama()
    assert _reference_on(llm).prefill_tok_s(list(range(128))) > 0
    assert llm.evals == [(128, False)]  # one eval of the whole prompt, without every position's logits
    assert llm._logits_all  # set back: the accuracy table reads every position


@pytest.mark.real_model
def test_llama_cpp_prefills_without_the_other_positions_logits():
    """On the real library and file: the prefill copies out no position's logits, and ``logits`` (every position)
    and greedy decoding still work after it. Runs where ``llama-cpp-python`` is installed."""
    pytest.importorskip("llama_cpp")
    from inference.model.gguf import default_gguf_path

    reference = LlamaCppReference(default_gguf_path(), threads=1, context=256)
    ids = reference.llm.tokenize(b"The cat sat on the mat because it was tired.")
    reference.llm.scores[: len(ids)] = np.nan
    assert reference.prefill_tok_s(ids) > 0
    assert np.isnan(reference.llm.scores[: len(ids)]).all()  # no row copied out: none was asked for
    logits = reference.logits(ids)
    assert logits.shape == (len(ids), reference.llm.n_vocab()) and logits.isfinite().all()
    assert reference.decode_tok_s(ids, 4) > 0
