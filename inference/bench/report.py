"""Where every benchmark's report goes: one JSON file (its folder made on the way), and a line saying where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_report(report: Any, path: str | Path, indent: int = 1) -> Path:
    """Write ``report`` (plain JSON data) to ``path`` and print where it went."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=indent))
    print(f"wrote {out}")
    return out
