"""A replica's startup fingerprint: what every replica of one class must share for its students to see the same
numbers and the same teacher, written once to the shared room (``RedisRoom.join``).

Owns ``replica_fingerprint()``: the app's code (a checksum of its Python files), each offered model (the sha256 of
its GGUF file, or its source where it is a folder or a hub id), the weights mode and dtype, and the class settings
(the class id, and the teacher key as a slow salted hash: the key itself never leaves the process). The first
replica of a class writes it; a replica whose fingerprint differs refuses to join, and its class panel says which
parts differ (``ReplicaRefused``). Plain Python: no Streamlit, no torch.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from inference.api import gguf_source, settings
from ui.classroom import settings as class_settings

ROOT = Path(__file__).resolve().parents[2]
CODE_FOLDERS = ("inference", "ui", "pages")


def replica_fingerprint(models: dict[str, str | None]) -> dict[str, object]:
    """This process's fingerprint for the offered ``models`` (name -> source, ``ui.common.models.allowlist()``)."""
    operator, klass = settings.current(), class_settings.current()
    return {
        "code": code_checksum(),
        "models": {name: model_checksum(source) for name, source in models.items()},
        "weights": operator.quant or "none",
        "dtype": operator.dtype or "default",
        "class": klass.class_id,
        "teacher key": _key_hash(klass.teacher_key, klass.class_id),
    }


@cache
def code_checksum() -> str:
    """sha256 over the app's Python files (paths and contents): replicas of two checkouts differ."""
    digest = hashlib.sha256()
    for path in sorted([ROOT / "app.py", *(p for folder in CODE_FOLDERS for p in (ROOT / folder).rglob("*.py"))]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@cache
def model_checksum(source: str | None) -> str:
    """The sha256 of the model's GGUF file; a folder or hub id is named as it is (its files are not hashed)."""
    path = gguf_source(source)
    if path is None:
        return f"source {source}"
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _key_hash(key: str | None, class_id: str) -> str:
    if key is None:
        return "none"
    return hashlib.scrypt(key.encode(), salt=b"llmx-class:" + class_id.encode(), n=2**14, r=8, p=1).hex()


def differences(ours: dict[str, object], theirs: dict[str, object]) -> list[str]:
    """The parts of two fingerprints that differ, in words ("the model SmolLM2-135M-Instruct's checksum")."""
    found = []
    for part in sorted(set(ours) | set(theirs)):
        if part == "models":
            a, b = ours.get(part) or {}, theirs.get(part) or {}
            if not isinstance(a, dict) or not isinstance(b, dict):
                found.append("the models")
                continue
            found += [f"the model {name}'s checksum" for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]
        elif ours.get(part) != theirs.get(part):
            found.append(f"the {part}")
    return found
