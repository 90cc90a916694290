"""The engine as a package (pyproject.toml): ``pip install -e .`` gives a notebook ``import inference``.

The wheel is built here from a copy of the files it is made of (no network, no build isolation: the
venv's setuptools), so the check sees exactly what an install would: every module of ``inference/`` and
nothing of the app, and a dependency list that names every library the engine imports.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Benchmarks' references, installed by hand when wanted (README: the optional benchmark extra).
OPTIONAL = {"llama_cpp"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised as PEP 503 does (``huggingface_hub>=1`` -> huggingface-hub)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def _engine_imports() -> dict[str, str]:
    """Each third-party top-level module ``inference/`` imports (benchmarks' optional references aside): a file."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "inference").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "inference" and top not in OPTIONAL:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_the_dependencies_name_every_library_the_engine_imports():
    from importlib.metadata import packages_distributions

    listed = {_name(requirement) for requirement in _project()["dependencies"]}
    providers = packages_distributions()
    missing = {
        module: where
        for module, where in _engine_imports().items()
        if not {_name(dist) for dist in providers.get(module, [module])} & listed
    }
    assert not missing, f"imported by the engine but not in pyproject.toml's dependencies: {missing}"


def test_the_dependencies_allow_the_pinned_versions():
    """A lower bound above what requirements.txt pins would make ``pip install -e .`` fight the app's venv."""
    pins = {
        _name(line): line.split("==")[1].split()[0]
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }
    for requirement in _project()["dependencies"]:
        name, bound = _name(requirement), requirement.partition(">=")[2]
        if name in pins and bound:
            pinned = tuple(int(p) for p in re.findall(r"\d+", pins[name])[:3])
            assert tuple(int(p) for p in bound.split("."))[:3] <= pinned, (requirement, pins[name])


def test_the_wheel_holds_the_engine_and_nothing_of_the_app(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "inference", source / "inference", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))",
            str(tmp_path / "dist"),
        ],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = tmp_path / "dist" / built.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    modules = {n for n in names if n.endswith(".py")}
    expected = {str(p.relative_to(ROOT)) for p in (ROOT / "inference").rglob("*.py")}
    assert modules == expected, (sorted(expected - modules), sorted(modules - expected))
    required = {
        _name(line.split(":", 1)[1].strip()) for line in metadata.splitlines() if line.startswith("Requires-Dist:")
    }
    assert required == {_name(r) for r in _project()["dependencies"]}
