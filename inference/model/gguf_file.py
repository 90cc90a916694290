"""A GGUF file read directly: its metadata and its tensor directory, each tensor's data a view of the mapped file.

Why not ``gguf.GGUFReader``: it turns every metadata field into Python objects as it opens a file, and
Gemma 3's 262,144-entry vocabulary (its tokens, scores and types) took 12-50 s of every opening on these
machines: each engine loaded with ``quant="gguf"`` and each Quantization page of Gemma paid it. A load
needs the architecture's fields and the tensors, so the large tokenizer arrays are skipped over here
(strings by their lengths) and everything else is read as ``GGUFReader.fields[key].contents()`` reads it.
The tensors are the reader's (name, block type, shape, sizes, offset, data as the same numpy view), so
the gguf package's own dequantization reads them as before. Little-endian files of version 2 and 3 (every
file the package writes); anything else is read by ``GGUFReader`` itself. ``tests/test_blocks.py`` checks
both files against ``GGUFReader``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# GGUF's value types: the scalars by struct format, then string (8) and array (9)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# the tokenizer's large arrays: the tokenizer conversion reads them itself (``gguf._save_tokenizer``)
LARGE_TOKENIZER_ARRAYS = ("tokens", "merges", "token_type", "scores")


def is_large_tokenizer_array(key: str) -> bool:
    return key.startswith("tokenizer.ggml.") and key.split(".")[-1] in LARGE_TOKENIZER_ARRAYS


def reader_metadata(reader) -> dict:
    """A ``gguf.GGUFReader``'s fields as values, but the large tokenizer arrays (and any field it cannot read)."""
    meta = {}
    for key, field in reader.fields.items():
        if is_large_tokenizer_array(key):
            continue  # large arrays: the tokenizer conversion reads them itself
        try:
            meta[key] = field.contents()
        except Exception:  # noqa: BLE001 - unreadable optional field
            continue
    return meta


@dataclass(frozen=True)
class FileTensor:
    """One tensor as ``gguf.GGUFReader`` lists it (the fields this code reads)."""

    name: str
    tensor_type: object  # gguf.GGMLQuantizationType
    shape: tuple[int, ...]  # GGUF order: the fastest-varying dimension first
    n_elements: int
    n_bytes: int
    data_offset: int  # of the tensor's first byte in the file
    data: np.ndarray  # value types: (…, K) values; block types: (…, bytes per row) uint8


class _Cursor:
    """Reads GGUF's little-endian values from a buffer, moving forward."""

    def __init__(self, data) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str):
        value = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return value

    def string(self, keep: bool = True) -> str | None:
        length = self.take("<Q")
        self.at += length
        return bytes(self.data[self.at - length : self.at]).decode("utf-8") if keep else None

    def value(self, kind: int, keep: bool = True):
        """The next value of ``kind`` as ``contents()`` gives it (None, moved past, when ``keep`` is False)."""
        if kind == _STRING:
            return self.string(keep)
        if kind != _ARRAY:
            return self.take(_SCALARS[kind])
        inner, count = self.take("<I"), self.take("<Q")
        if inner in _SCALARS:
            size = struct.calcsize(_SCALARS[inner])
            values = None
            if keep:
                values = np.frombuffer(self.data, np.dtype(_SCALARS[inner]), count, self.at).tolist()
            self.at += size * count
            return values
        items = [self.value(inner, keep) for _ in range(count)]
        return items if keep else None


def read_gguf(path: str | Path) -> tuple[dict, list[FileTensor]]:
    """``path``'s metadata (every field but the large tokenizer arrays) and its tensors, in file order."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader
    from gguf.quants import quant_shape_to_byte_shape

    mapped = np.memmap(path, mode="r")
    if bytes(mapped[:4]) != b"GGUF" or int.from_bytes(bytes(mapped[4:8]), "little") not in (2, 3):
        reader = GGUFReader(path)  # big-endian, version 1 or not GGUF at all: the package's reader says
        return reader_metadata(reader), reader.tensors
    cursor = _Cursor(mapped)
    cursor.at = 8  # after the magic and the version
    n_tensors, n_fields = cursor.take("<Q"), cursor.take("<Q")
    meta = {"GGUF.version": int.from_bytes(bytes(mapped[4:8]), "little"), "GGUF.tensor_count": n_tensors}
    meta["GGUF.kv_count"] = n_fields  # the reader's own three fields first, then the file's
    for _ in range(n_fields):
        key, kind = cursor.string(), cursor.take("<I")
        keep = not is_large_tokenizer_array(key)
        value = cursor.value(kind, keep)
        if keep:
            meta[key] = value
    directory = []
    for _ in range(n_tensors):
        name, n_dims = cursor.string(), cursor.take("<I")
        shape = tuple(cursor.take("<Q") for _ in range(n_dims))
        directory.append((name, GGMLQuantizationType(cursor.take("<I")), shape, cursor.take("<Q")))
    alignment = int(meta.get("general.alignment", 32))
    start = (cursor.at + alignment - 1) // alignment * alignment
    value_types = {  # the types stored as plain values; every other is blocks of bytes
        "F16": np.float16,
        "F32": np.float32,
        "F64": np.float64,
        "I8": np.int8,
        "I16": np.int16,
        "I32": np.int32,
        "I64": np.int64,
    }
    tensors = []
    for name, kind, shape, offset in directory:
        n_elements = int(np.prod(shape))
        block_size, type_size = GGML_QUANT_SIZES[kind]
        n_bytes = n_elements * type_size // block_size
        dims = tuple(reversed(shape))  # numpy order: the fastest-varying dimension last
        data = mapped[start + offset : start + offset + n_bytes]
        if kind.name in value_types:
            data = data.view(value_types[kind.name]).reshape(dims)
        else:
            data = data.reshape(quant_shape_to_byte_shape(dims, kind))
        tensors.append(FileTensor(name, kind, shape, n_elements, n_bytes, start + offset, data))
    return meta, tensors
