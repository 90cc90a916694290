"""Every GGUF block type a shipped file holds, read from its bytes (``inference.inspection.blocks``), against the
``gguf`` package's own dequantization: on random bytes (every type, Q4_0 included, which no shipped file holds) and
on real blocks of both models' files, read through the engine's own GGUF reader."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize

from inference.inspection import blocks
from inference.inspection.weights import file_summary, file_tensors

FP16_SLOTS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q8_0": [0], "Q4_K": [0, 2], "Q6_K": [208]}


def _random_block(type_name: str, rng: np.random.Generator) -> np.ndarray:
    raw = rng.integers(0, 256, blocks.BLOCK_SIZES[type_name][1], dtype=np.uint8)
    for at in FP16_SLOTS[type_name]:  # finite fp16 scales (random bytes could be NaN or inf)
        raw[at : at + 2] = np.array([rng.uniform(-0.05, 0.05)], dtype=np.float16).view(np.uint8)
    return raw


@pytest.mark.parametrize("type_name", list(blocks.BLOCK_SIZES))
def test_every_type_decodes_as_gguf_does(type_name):
    rng = np.random.default_rng(sum(map(ord, type_name)))
    for _ in range(50):
        raw = _random_block(type_name, rng)
        layout = blocks.decode_block(type_name, raw)
        expected = dequantize(raw[None, :], GGMLQuantizationType[type_name]).astype(np.float32)[0]
        assert layout.decoded.shape == (layout.n_weights,) == expected.shape
        np.testing.assert_allclose(
            layout.decoded, expected, rtol=0, atol=1e-6 * max(1.0, float(np.abs(expected).max()))
        )
        low, high = layout.code_range
        assert layout.codes.min() >= low and layout.codes.max() <= high
        groups = np.repeat(np.arange(layout.groups), layout.group_size)
        np.testing.assert_allclose(
            layout.scales[groups] * layout.codes + layout.offsets[groups],
            expected,
            rtol=0,
            atol=1e-6 * max(1.0, float(np.abs(expected).max())),
        )  # w = scale·q + offset
        assert layout.n_bytes == raw.size and layout.bits_per_weight == 8 * raw.size / layout.n_weights


def test_wrong_sizes_and_types_are_refused():
    with pytest.raises(ValueError, match="22 bytes"):
        blocks.decode_block("Q5_0", np.zeros(20, dtype=np.uint8))
    with pytest.raises(ValueError, match="not read here"):
        blocks.decode_block("IQ2_XS", np.zeros(66, dtype=np.uint8))


def assert_read_as_gguf_reader_reads(path, reader) -> None:
    """``inference.model.gguf_file.read_gguf`` gives what ``reader`` (a ``gguf.GGUFReader`` of ``path``) gives: every
    field but the tokenizer's large arrays, of the same type, and each tensor's type, shape, sizes, offset and data."""
    from inference.model.gguf_file import is_large_tokenizer_array, read_gguf

    meta, tensors = read_gguf(path)
    expected = {key: field.contents() for key, field in reader.fields.items() if not is_large_tokenizer_array(key)}
    assert list(meta) == list(expected)
    assert all(meta[key] == value and type(meta[key]) is type(value) for key, value in expected.items())
    assert [t.name for t in tensors] == [t.name for t in reader.tensors]
    for ours, theirs in zip(tensors, reader.tensors):
        assert (ours.tensor_type, ours.shape, ours.n_elements, ours.n_bytes, ours.data_offset) == (
            theirs.tensor_type,
            tuple(map(int, theirs.shape)),
            theirs.n_elements,
            theirs.n_bytes,
            theirs.data_offset,
        )
        assert ours.data.dtype == theirs.data.dtype and np.array_equal(ours.data, theirs.data)


def test_the_file_reader_is_a_gguf_reader():
    """The engine's reader against the gguf package's (Gemma's file: in tests/test_engine_gemma.py, beside the
    reader it opens anyway)."""
    from gguf import GGUFReader

    from inference.model.gguf import default_gguf_path

    path = str(default_gguf_path())
    assert_read_as_gguf_reader_reads(path, GGUFReader(path))


def test_the_shipped_files_blocks():
    """SmolLM2's Q4_1 and Q8_0 blocks and Gemma's Q5_0, Q4_K, Q6_K and Q8_0 blocks, read from the files."""
    from inference.model.gguf import default_gguf_path
    from inference.model.packages import GEMMA3_270M, gemma3_270m_gguf_path, is_installed

    files = {"SmolLM2": (default_gguf_path(), {"Q4_1", "Q8_0"})}
    if is_installed(GEMMA3_270M):
        files["Gemma"] = (gemma3_270m_gguf_path(), {"Q5_0", "Q4_K", "Q6_K", "Q8_0"})
    for name, (path, types) in files.items():
        tensors = file_tensors(path)
        summary = file_summary(tensors)
        assert set(summary.block_tensors) == types, (name, set(summary.block_tensors))
        for type_name, names in summary.block_tensors.items():
            for row, block in ((0, 0), (1, 1)):
                stored = blocks.stored_layout(tensors, names[0], row, block)
                assert stored.layout.type_name == type_name
                np.testing.assert_allclose(stored.layout.decoded, stored.reference, rtol=0, atol=1e-7)
                found, n = tensors[names[0]], stored.layout.n_weights
                whole_row = dequantize(np.asarray(found.data)[row : row + 1], found.tensor_type)[0]  # (columns,)
                np.testing.assert_allclose(stored.reference, whole_row[block * n : (block + 1) * n], rtol=0, atol=0)
                assert len(set(stored.layout.codes.tolist())) > 1  # real codes, not an empty chart
    assert blocks.stored_layout(tensors, "no such tensor") is None


def test_the_kernels_copy_rounds_scale_and_zero_to_bfloat16():
    """The 4-bit kernel's weights for a block (the engine's own groups, bf16 scale and zero) match kernel_held."""
    import torch

    from inference.model.quant_formats import INT4_FORMATS

    rng = np.random.default_rng(3)
    for type_name in blocks.KERNEL_TYPES:
        raw = _random_block(type_name, rng)
        groups = INT4_FORMATS[type_name](raw[None, :])
        scale, zero = groups.scale[0].to(torch.bfloat16).float(), groups.zero[0].to(torch.bfloat16).float()
        codes = groups.codes[0].float().reshape(-1, 32)
        expected = ((codes - 8) * scale[:, None] + zero[:, None]).reshape(-1).numpy()
        np.testing.assert_array_equal(blocks.kernel_held(blocks.decode_block(type_name, raw)), expected)
    assert blocks.kernel_held(blocks.decode_block("Q5_0", _random_block("Q5_0", rng))) is None


@pytest.mark.parametrize("type_name, expected", [("Q4_0", 8), ("Q5_0", 16), ("Q8_0", 0), ("Q6_K", 32)])
def test_the_code_for_a_zero_weight(type_name, expected):
    """The block view's dashed line: the code every group decodes to 0 (none for Q4_K, whose groups differ)."""
    rng = np.random.default_rng(7)
    raw = _random_block(type_name, rng)
    if type_name == "Q6_K":
        raw[192:208] = np.arange(1, 17, dtype=np.int8).view(np.uint8)  # no group scale of 0
    layout = blocks.decode_block(type_name, raw)
    assert layout.zero_code == pytest.approx(expected)
    np.testing.assert_allclose(layout.scales * layout.zero_code + layout.offsets, 0, atol=1e-9)
    q4_1 = blocks.decode_block("Q4_1", _random_block("Q4_1", rng))
    assert q4_1.zero_code == pytest.approx(-q4_1.fields["m"] / q4_1.fields["d"])
    q4_k = _random_block("Q4_K", rng)
    assert blocks.decode_block("Q4_K", q4_k).zero_code is None  # eight groups, eight different zeros


def test_the_block_chart_marks_the_zero_code_inside_the_code_range():
    from ui.quantization.figures import make_block_layout

    drawn = make_block_layout([3, 31, 0], np.array([0.1, 0.2, 0.3]), 3, (0, 31), None, "t", zero_code=16)
    assert [s.y0 for s in drawn.layout.shapes] == [16]
    assert "dashed: q = 16, which decodes to w = 0" in drawn.layout.annotations[0].text  # the codes' subplot title
    outside = make_block_layout([3, 15, 0], np.array([0.1, 0.2, 0.3]), 3, (0, 15), None, "t", zero_code=-3.2)
    assert not outside.layout.shapes and "dashed" not in outside.layout.annotations[0].text  # Q4_1's −m/d below 0
