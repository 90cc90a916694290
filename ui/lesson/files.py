"""The lesson files the app offers: ``lessons/*.toml`` beside the app, found by name, read and checked.

Owns the folder (``LESSONS_DIR``), what a lesson's name may be (a link carries it: ``NAME``), and turning a file
that cannot be read (missing, not UTF-8) into the same one-line ``LessonError`` a malformed one gets.
"""

from __future__ import annotations

import re
from pathlib import Path

from ui.lesson.format import MAX_FILE_BYTES, Lesson, LessonError, parse

LESSONS_DIR = Path(__file__).resolve().parents[2] / "lessons"
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # a file's stem: lower-case letters, digits, - and _


def names(folder: Path | None = None) -> list[str]:
    """The lessons on offer, by name (their files' stems), sorted."""
    folder = folder or LESSONS_DIR
    if not folder.is_dir():
        return []
    return sorted(path.stem for path in folder.glob("*.toml") if NAME.fullmatch(path.stem))


def load(name: str, folder: Path | None = None) -> Lesson:
    """The lesson called ``name`` (``LessonError`` when there is none, or its file has problems)."""
    folder = folder or LESSONS_DIR
    if not NAME.fullmatch(name) or not (folder / f"{name}.toml").is_file():
        shown = repr(name if len(name) <= 40 else name[:40] + "…")
        raise LessonError([f"no lesson called {shown} (the lessons: {', '.join(names(folder)) or 'none'})"])
    return load_path(folder / f"{name}.toml")


def load_path(path: Path) -> Lesson:
    """The lesson in the file at ``path``, checked (``LessonError``: one line per problem, each with its place)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise LessonError([f"{path.name}: cannot be read ({error.strerror or error})"]) from None
    if len(data) > MAX_FILE_BYTES:
        raise LessonError([f"{path.name}: the file is over {MAX_FILE_BYTES:,} bytes: a lesson is a short text"])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LessonError([f"{path.name}: not UTF-8 text (byte {error.start:,})"]) from None
    return parse(text, path.stem, path.name)
