"""A file's SHA-256, remembered by what ``stat`` says of it, so a large file unchanged since it was last read is not read again.

Owns ``known_sha256`` and its small store (``cache_root()/digests.json``: absolute path -> the stat it was hashed at
and the digest). The conversion cache is checked on every load (the GGUF that names it, and every file it holds:
1.3 GB for Gemma 3 270M, 1.1 s of CPU a load); with this, a file is read again only when it may have changed.

When a remembered digest is trusted, as git trusts its index: the file's device, inode, size, mtime and ctime are the
ones it was hashed at, and its ctime is more than ``RACY_NS`` older than the hashing. Any write through the file
system moves the ctime (which no call can set back), and a write in the same clock tick as the hashing is caught
by the second rule: such a digest is not trusted, and the file is read again. What this does not see is a change
below the file system (a disk's bit rot), which no check short of reading the bytes sees either.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from ..settings import current as current_settings

RACY_NS = 2_000_000_000  # a digest taken within 2 s of the file's last change is not trusted (clock ticks, NFS)
STORE_NAME = "digests.json"
_clock = time.time_ns  # when a digest is taken (a test moves it on)


def sha256_file(path: Path) -> str:
    """The SHA-256 of ``path``'s bytes, read now."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _stamp(stat: os.stat_result) -> list[int]:
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _store_path() -> Path:
    return current_settings().cache / STORE_NAME


def _read_store(path: Path) -> dict:
    try:
        store = json.loads(path.read_text())
        return store if isinstance(store, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_store(path: Path, store: dict) -> None:
    """Written whole under a temporary name and renamed: a reader sees the old store or the new one. Two processes
    writing at once can lose one entry, which costs one more read of that file later."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=STORE_NAME, dir=path.parent)
        with os.fdopen(handle, "w") as out:
            json.dump(store, out)
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only or full cache folder: the digest is simply read again next time


def known_sha256(path: Path) -> str:
    """The SHA-256 of ``path``: remembered when the file cannot have changed since it was hashed, else read now."""
    path = Path(path).resolve()
    stat = path.stat()
    store_path = _store_path()
    store = _read_store(store_path)
    entry = store.get(str(path))
    if (
        isinstance(entry, dict)
        and entry.get("stamp") == _stamp(stat)
        and isinstance(entry.get("hashed_ns"), int)
        and entry["hashed_ns"] - stat.st_ctime_ns > RACY_NS
        and isinstance(entry.get("sha256"), str)
    ):
        return entry["sha256"]
    hashed_ns = _clock()
    digest = sha256_file(path)
    if path.stat().st_ctime_ns != stat.st_ctime_ns:
        return digest  # changed while being read: this digest describes no one state of the file; not kept
    store = {name: value for name, value in _read_store(store_path).items() if Path(name).exists()}
    store[str(path)] = {"stamp": _stamp(stat), "hashed_ns": hashed_ns, "sha256": digest}
    _write_store(store_path, store)
    return digest
