"""A file's digest is read once while the file is unchanged, and read again whenever it may have changed."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from inference.model import digests


@pytest.fixture
def reads(tmp_path, monkeypatch):
    """The files whose bytes were read, in order; the cache (and the digest store) in a folder of this test."""
    monkeypatch.setenv("LLM_EXPLORER_CACHE", str(tmp_path / "cache"))
    done: list[str] = []
    real = digests.sha256_file
    monkeypatch.setattr(digests, "sha256_file", lambda path: done.append(path.name) or real(path))
    return done


def later(monkeypatch, seconds: float = 3.0) -> None:
    """Digests from now on are taken as if ``seconds`` later (past the racy window of the file's last change)."""
    real = time.time_ns
    monkeypatch.setattr(digests, "_clock", lambda: real() + int(seconds * 1e9))


def test_an_unchanged_file_is_read_once(tmp_path, reads, monkeypatch):
    later(monkeypatch)
    path = tmp_path / "weights.bin"
    path.write_bytes(b"weights" * 1000)
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digests.known_sha256(path) == expected
    assert digests.known_sha256(path) == expected
    assert reads == ["weights.bin"]


def test_a_rewrite_of_the_same_size_and_mtime_is_read_again(tmp_path, reads, monkeypatch):
    later(monkeypatch)
    path = tmp_path / "weights.bin"
    path.write_bytes(b"weights" * 1000)
    digests.known_sha256(path)
    before = path.stat()
    time.sleep(0.05)  # past the file system's clock tick
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF  # one flipped byte, and the old mtime put back: only the ctime tells
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert digests.known_sha256(path) == hashlib.sha256(bytes(data)).hexdigest()
    assert reads == ["weights.bin", "weights.bin"]


def test_a_digest_taken_right_after_a_change_is_not_trusted(tmp_path, reads):
    """Within the racy window a write in the same clock tick leaves every stat field as it was: read again."""
    path = tmp_path / "weights.bin"
    path.write_bytes(b"weights" * 1000)
    digests.known_sha256(path)
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))  # maybe in the same tick as the first write
    assert digests.known_sha256(path) == hashlib.sha256(bytes(data)).hexdigest()
    assert reads == ["weights.bin", "weights.bin"]


@pytest.mark.parametrize("store", ["not json", "[1, 2]", '{"x": 3}'])
def test_a_broken_store_is_read_past_and_rewritten(tmp_path, reads, monkeypatch, store):
    later(monkeypatch)
    path = tmp_path / "weights.bin"
    path.write_bytes(b"weights")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / digests.STORE_NAME).write_text(store)
    assert digests.known_sha256(path) == hashlib.sha256(b"weights").hexdigest()
    assert str(path.resolve()) in json.loads((tmp_path / "cache" / digests.STORE_NAME).read_text())
    assert digests.known_sha256(path) == hashlib.sha256(b"weights").hexdigest()
    assert reads == ["weights.bin"]


def test_the_conversion_cache_is_checked_without_reading_it_again(tmp_path, reads, monkeypatch):
    """A load after the first reads neither the GGUF nor the converted files, until one of them changes."""
    from inference.model import gguf

    later(monkeypatch)
    monkeypatch.setattr(gguf, "_convert", lambda source, out: (out / "model.safetensors").write_bytes(b"w" * 1000))
    source = tmp_path / "model.gguf"
    source.write_bytes(b"pretend gguf")
    folder = gguf.converted_folder(source)  # the GGUF read for its name, the new files hashed into the manifest
    assert reads == ["model.gguf"]
    reads.clear()
    assert gguf.converted_folder(source) == folder  # checked: the converted file read once (its first check)
    assert reads == ["model.safetensors"]
    reads.clear()
    assert gguf.converted_folder(source) == folder
    assert reads == []
    time.sleep(0.05)
    (folder / "model.safetensors").write_bytes(b"x" * 1000)  # corrupted: rebuilt, never used
    assert gguf.converted_folder(source) == folder
    assert (folder / "model.safetensors").read_bytes() == b"w" * 1000
