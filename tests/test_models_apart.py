"""Two different models on one server: every page's numbers stay with the session's own model.

Both models are tiny random Llamas served beside each other through the allowlist
(``LLM_EXPLORER_MODELS``), in one process, so they share every Streamlit cache. One
has SmolLM2's tokenizer (49,152 tokens), the other a 320-token BPE trained here, so
their merges, vocabularies, embedding matrices, attention and logits all differ. Each
page is opened for model A, then for model B, then for A again: A's numbers must be
the same both times and differ from B's.
"""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import APP, assert_clean, chart, plotly_array
from tests.tiny_models import save_folder, tiny_llama, train_tokenizer

TIMEOUT = 120
PROMPT = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, tokenizer_folder):
    """Allowlist entries ``tiny-a`` (SmolLM2's tokenizer) and ``tiny-b`` (its own small BPE)."""
    root = tmp_path_factory.mktemp("two-models")
    folder_a = save_folder(tiny_llama(), root / "a", tokenizer_folder)
    folder_b = root / "b"
    vocab = train_tokenizer(folder_b)
    tiny_llama(vocab_size=vocab, hidden_size=48, num_hidden_layers=3).save_pretrained(str(folder_b))
    patch = pytest.MonkeyPatch()
    patch.setenv("LLM_EXPLORER_MODELS", f"tiny-a={folder_a};tiny-b={folder_b}")
    yield "tiny-a", "tiny-b"
    patch.undo()


def open_as(model: str, script: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": model, "prompt": PROMPT})
    at.run()
    at.switch_page(script)
    at.run()
    assert_clean(at)
    return at


def merges_shown(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("merge ")]


def numbers(at: AppTest, key: str, field: str) -> np.ndarray:
    return np.asarray(plotly_array(chart(at, key)["data"][0][field]), dtype=float)


READERS = {  # what each page shows that belongs to one model
    "pages/tokenization.py": lambda at: (merges_shown(at), numbers(at, "token_ids_chart", "y")),
    "pages/embeddings.py": lambda at: (numbers(at, "embedding_heatmap", "z"),),
    "pages/attention.py": lambda at: (numbers(at, "attention_heatmap", "z"),),
    "pages/logits.py": lambda at: (numbers(at, "logits_bar", "y"),),
}


def same(a: tuple, b: tuple) -> bool:
    """Equal element by element (arrays: same shape and values, masked NaN cells equal to NaN)."""
    return all(np.array_equal(x, y, equal_nan=True) if isinstance(x, np.ndarray) else x == y for x, y in zip(a, b))


@pytest.mark.parametrize("script", list(READERS))
def test_each_page_keeps_to_its_own_model(two_models, script):
    model_a, model_b = two_models
    read = READERS[script]
    first_a = read(open_as(model_a, script))
    numbers_b = read(open_as(model_b, script))
    again_a = read(open_as(model_a, script))
    assert same(first_a, again_a), "model A's numbers changed after model B ran"
    assert not same(first_a, numbers_b), "the two models showed the same numbers"


def test_the_two_tokenizers_really_differ(two_models):
    """The premise: B's own BPE merges the prompt with other ranks than SmolLM2's merges."""
    at_a = open_as(two_models[0], "pages/tokenization.py")
    at_b = open_as(two_models[1], "pages/tokenization.py")
    assert merges_shown(at_a) and merges_shown(at_b) and merges_shown(at_a) != merges_shown(at_b)
    vocab_captions = [c.value for c in at_b.caption if "subwords" in c.value]
    assert any("320" in text or "3" in text for text in vocab_captions)
