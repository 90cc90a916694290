"""The inspection API reads a quantized embedding matrix by rows, never decoded whole (issue 23's hazard).

A ``QuantEmbedding``'s ``.weight`` builds the whole V×D float32 matrix on every access (671 MB for
Gemma), so the embedding reader and ``model_info`` must read its shape off the module and its rows by
lookup. Here that property is made to fail: every answer must still come, and equal what the whole
decoded matrix gives. The reader is also made to read in blocks smaller than the vocabulary, so the
block boundaries are crossed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import quantize

from inference.inspection import EmbeddingReader, embeddings, model_info
from inference.model.quant import QuantEmbedding
from inference.model.quant_formats import q8_0
from tests.test_batching import VOCAB, tiny_engine


@pytest.fixture
def quantized(monkeypatch):
    """A tiny engine whose embedding is Q8_0 rows, the whole matrix as the test decodes it, and a reader that
    fails if anything asks for the whole matrix again."""
    engine = tiny_engine("llama")
    dense = engine.model.embed.weight.detach().numpy()
    engine.model.embed = QuantEmbedding(q8_0(quantize(dense, GGMLQuantizationType.Q8_0)), torch.device("cpu"))
    whole = engine.model.embed.weight.numpy()  # (V, D), decoded once here, as the reference

    def refuse(self):
        raise AssertionError("the whole quantized matrix was decoded")

    monkeypatch.setattr(QuantEmbedding, "weight", property(refuse))
    monkeypatch.setattr(embeddings, "BLOCK_ROWS", 10)  # 97 rows: ten blocks, the last one short
    return engine, whole


def test_the_shape_comes_from_the_module(quantized):
    engine, whole = quantized
    assert model_info(engine).embedding_shape == whole.shape == (VOCAB, engine.config.d_model)
    with pytest.raises(AssertionError, match="decoded"):  # positive control: the refusal is armed
        engine.model.embed.weight  # noqa: B018


def test_rows_and_lengths_are_the_decoded_matrix(quantized):
    engine, whole = quantized
    reader = EmbeddingReader(engine)
    assert np.array_equal(reader.rows([3, 0, VOCAB - 1]), whole[[3, 0, VOCAB - 1]])  # a lookup is exact
    np.testing.assert_allclose(reader.row_norms().numpy(), np.linalg.norm(whole, axis=1), rtol=1e-6)


def test_the_nearest_rows_are_those_of_the_decoded_matrix(quantized):
    engine, whole = quantized
    token = 42
    unit = whole / np.linalg.norm(whole, axis=1, keepdims=True)
    cosines = unit @ unit[token]
    cosines[token] = -2.0
    expected = np.argsort(-cosines)[:12]
    found = EmbeddingReader(engine).nearest(token, k=12)
    assert [i for i, _ in found] == list(expected)
    # float32 products of unit vectors of width D: each cosine is off by at most ~D unit roundoffs
    bound = 4 * engine.config.d_model * np.finfo(np.float32).eps
    np.testing.assert_allclose([c for _, c in found], cosines[expected], atol=bound)
