"""``python -m ui.lesson check FILE [FILE ...]``: a teacher's check of lesson files, before a class sees them.

The file's format first (no model needed: every problem one line, naming the place); then, unless ``--format-only``,
each model this server offers: its own ranges (layers, heads) and every question's answer computed on it, so a
lesson that passes plays on every model. Exit status 0 when every file passes, 1 otherwise (2: a usage error).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ui.lesson.files import load_path
from ui.lesson.format import Lesson, LessonError, Limits, check_on_model


def _model_problems(lesson: Lesson, source: str) -> list[str]:
    from ui.common import models
    from ui.common.resources import client_for
    from ui.lesson.answers import check_answers  # loads the models: only for a full check

    problems = []
    for model in models.allowlist():
        config = client_for(model).info.config
        limits = Limits(model, config.n_layers, config.n_heads, config.vocab_size)
        found = check_on_model(lesson, limits, source)
        problems += found or check_answers(model, lesson)
    return problems


def check(paths: list[Path], format_only: bool = False) -> int:
    """Check each file; print its problems (or that it passes); the exit status."""
    failed = False
    for path in paths:
        try:
            lesson = load_path(path)
            problems = [] if format_only else _model_problems(lesson, path.name)
        except LessonError as error:
            problems = error.lines
        failed |= bool(problems)
        for line in problems:
            print(line)
        if not problems:
            asked = len(lesson.questions)
            print(f"{path.name}: OK, {len(lesson.steps)} steps, {asked} question{'s' * (asked != 1)}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ui.lesson", description="Lesson files for the Lesson page.")
    commands = parser.add_subparsers(dest="command", required=True)
    checking = commands.add_parser("check", help="check lesson files (the format, then every offered model)")
    checking.add_argument("files", nargs="+", type=Path, metavar="FILE")
    checking.add_argument("--format-only", action="store_true", help="the file's format only (no model is loaded)")
    args = parser.parse_args(argv)
    return check(args.files, args.format_only)


if __name__ == "__main__":
    sys.exit(main())
