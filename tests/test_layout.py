"""The house rules, checked on the source: no import cycle, layers that only look down, a UI-free engine.

The import graph is read with ``ast`` from every module under ``inference/`` and ``ui/``,
counting every import (top level, inside functions, under ``TYPE_CHECKING``), so a
cycle cannot hide behind a deferred import.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# inference's packages in dependency order: each may import only those before it (and the top-level helpers).
LAYERS = ["inference.model", "inference.generation", "inference.inspection", "inference.serving", "inference.bench"]
HELPERS = (
    "inference.threads",
    "inference.settings",
    "inference.number_text",
)  # top-level modules every layer may use (they import no layer)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports (``from x import y`` counts x.y when it is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]  # a name inside a module: the module itself
            if target and target != name:
                found.add(target)
    return found


def graph(package: str) -> dict[str, set[str]]:
    found = modules(package)
    known = set(found)
    return {name: imported(name, path, known) for name, path in found.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_cycle_finder_finds_a_planted_cycle():
    """Positive control: the checker must be able to fail."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def package_of(module: str) -> str:
    """A module's package below ``inference`` ('inference.model' for 'inference.model.kv_cache')."""
    return ".".join(module.split(".")[:2])


@pytest.mark.parametrize("package", ["inference", "ui"])
def test_no_import_cycle(package):
    edges = graph(package)
    if package == "inference":
        # A package's __init__ re-exporting its modules would make every module "depend" on its
        # parent through the re-export; the rule is about modules, so the facade is left out.
        edges = {name: deps - {"inference"} for name, deps in edges.items()}
    assert find_cycle(edges) is None, f"import cycle: {' -> '.join(find_cycle(edges))}"


def test_inference_packages_only_import_the_layers_below():
    for name, deps in graph("inference").items():
        if package_of(name) not in LAYERS:
            continue
        rank = LAYERS.index(package_of(name))
        for dep in deps:
            if package_of(dep) in LAYERS:
                assert LAYERS.index(package_of(dep)) <= rank, f"{name} imports {dep}, a layer above it"
            else:
                assert dep in HELPERS, f"{name} imports {dep}: only the layers below and {', '.join(HELPERS)}"


def test_inference_never_imports_the_ui():
    for name, path in modules("inference").items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for target in names:
                assert target.split(".")[0] not in ("streamlit", "plotly", "ui"), f"{name} imports {target}"


def test_no_module_outside_the_tokenizer_touches_the_wrapped_tokenizer():
    """The tokenizer wrapper's Hugging Face objects are private to ``inference/model/tokenizer.py``."""
    offenders = []
    for folder in ("inference", "ui", "pages", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name in ("tokenizer.py", "test_layout.py"):
                continue
            text = path.read_text()
            for attribute in ("tokenizer._hf", "tokenizer._backend", "tokenizer.hf", "tokenizer.backend"):
                if attribute in text:
                    offenders.append(f"{path.relative_to(ROOT)}: {attribute}")
    assert not offenders, offenders


def test_every_page_hands_a_legacy_run_over_to_the_app_first():
    """The deep-link fix (``ui.common.navigation.redirect_legacy_run``) is each page's first statement after its imports."""
    for path in sorted((ROOT / "pages").glob("*.py")):
        body = [
            node
            for node in ast.parse(path.read_text()).body
            if not isinstance(node, (ast.Import, ast.ImportFrom))
            and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        ]  # the docstring
        first = body[0]
        assert (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Call)
            and getattr(first.value.func, "id", None) == "redirect_legacy_run"
        ), path.name
        imports_after = [
            node
            for node in ast.parse(path.read_text()).body
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno > first.lineno
        ]
        assert not imports_after, f"{path.name} imports after the redirect"


# The UI's folders in dependency order: a module may import only from its own folder and the folders before it. The
# class's store (no Streamlit, no other folder) and the shared pieces come first, then one folder per chapter in the order a learner meets them, then the link (which knows
# every chapter's state), the class's Streamlit glue (which follows links) and the lessons (which open chapters by
# their links, alone or with a class).
UI_ORDER = [
    "classroom",
    "common",
    "shell",
    "tokenization",
    "embeddings",
    "attention",
    "logits",
    "logit_lens",
    "sampling",
    "generation",
    "compare",
    "speculative",
    "quantization",
    "batching",
    "paged_kv",
    "experiments",
    "overview",
    "session",
    "class_page",
    "lesson",
]


def ui_folder(module: str) -> str:
    """A module's folder below ``ui`` ('attention' for 'ui.attention.claims'; '' for ``ui`` itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def folder_edges() -> dict[str, set[str]]:
    """Which ui folder imports which (a module importing one of another folder makes an edge)."""
    edges: dict[str, set[str]] = {}
    for name, deps in graph("ui").items():
        edges.setdefault(ui_folder(name), set()).update(
            ui_folder(dep) for dep in deps if ui_folder(dep) not in (ui_folder(name), "")
        )
    edges.pop("", None)
    return edges


def test_the_ui_is_made_of_its_folders_in_their_written_order():
    loose = {path.stem for path in (ROOT / "ui").glob("*.py")} - {"__init__"}
    assert not loose, f"modules outside ui's folders: {sorted(loose)}"
    parts = {path.name for path in (ROOT / "ui").iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    assert parts == set(UI_ORDER), f"folders not in UI_ORDER: {parts ^ set(UI_ORDER)}"


def test_no_cycle_between_ui_folders():
    edges = folder_edges()
    assert find_cycle(edges) is None, f"folder cycle: {' -> '.join(find_cycle(edges))}"


def test_each_ui_folder_imports_only_the_folders_before_it():
    offenders = [
        f"ui.{folder} imports ui.{dep}"
        for folder, deps in folder_edges().items()
        for dep in deps
        if UI_ORDER.index(dep) > UI_ORDER.index(folder)
    ]
    assert not offenders, offenders


def test_the_classroom_store_imports_no_streamlit():
    """``ui/classroom`` is the class's state (room, rounds, stores): testable and usable without a page."""
    for path in sorted((ROOT / "ui" / "classroom").glob("*.py")):
        for module in _imports_of(path):
            assert module.split(".")[0] not in ("streamlit", "plotly"), f"{path.name} imports {module}"


def test_a_page_imports_few_ui_folders():
    """A page is thin: its chapter's folder and the shared ones. The median page reaches at most 3 folders besides
    ``common`` and ``shell``."""
    counts = []
    for path in sorted((ROOT / "pages").glob("*.py")):
        folders = {m.split(".")[1] for m in _imports_of(path) if m.startswith("ui.")} - {"common", "shell"}
        counts.append(len(folders))
    counts.sort()
    assert counts[len(counts) // 2] <= 3, counts


def test_page_files_are_named_by_their_deep_link():
    """No number in a page's file name: ``ui/common/navigation.py`` owns the order, the file name is the link."""
    from ui.common.navigation import PAGES

    for spec in PAGES:
        assert Path(spec.script).stem == spec.url_path, spec.script
    assert {path.name for path in (ROOT / "pages").glob("*.py")} == {Path(spec.script).name for spec in PAGES}


def _imports_of(path: Path) -> list[str]:
    """Every module ``path`` imports by name (``from x import y``: x), deferred imports included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append(node.module or "")
    return found


def _ui_files() -> list[Path]:
    return sorted((ROOT / "ui").rglob("*.py")) + sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]


def test_the_ui_never_imports_torch_nor_the_models_insides():
    """The UI reads an engine through ``inference``'s public API and one ``EngineClient`` per model: numpy and
    plain dataclasses, never a tensor, never ``inference.model.*`` (whose modules are the engine's own)."""
    offenders = []
    for path in _ui_files():
        for module in _imports_of(path):
            if module.split(".")[0] == "torch" or module.startswith("inference.model"):
                offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not offenders, offenders


def _attribute_chains(path: Path) -> set[str]:
    """Every dotted name ``a.b.c`` the file reads (``engine.model.embed`` -> "engine.model.embed")."""
    chains = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            parts, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name):
                chains.add(".".join([value.id, *reversed(parts)]))
            elif isinstance(value, ast.Call):
                chains.add(".".join(["()", *reversed(parts)]))
    return chains


def _reaches(chains: set[str]) -> list[str]:
    """The names that reach into an engine: its model (``engine.model``, ``engine_for(m).model.embed``), a walk's
    engine (``stepper.engine``), a model's own methods (``.rope_for``)."""
    return sorted(
        c
        for c in chains
        if (".model" in c and c.split(".")[0] in ("engine", "()"))
        or c.startswith("stepper.engine")
        or c.endswith(".rope_for")
    )


def test_only_the_resources_hold_an_engine_and_nothing_touches_its_model():
    """``ui/common/resources.py`` loads engines and wraps each in its client; every other module reads through
    ``client_for``: no ``engine.model``, no ``stepper.engine``, no ``engine_for``."""
    offenders = []
    for path in _ui_files():
        name = str(path.relative_to(ROOT))
        touched = _reaches(_attribute_chains(path))
        if name != "ui/common/resources.py":
            touched += [
                f"{module} (engine_for / load_engine)"
                for module in _imports_of(path)
                if module == "ui.common.resources" and re.search(r"\b(engine_for|load_engine)\b", path.read_text())
            ]
        offenders += [f"{name}: {chain}" for chain in touched]
    assert not offenders, offenders


def test_the_check_can_see_a_reach_into_the_model(tmp_path):
    """Positive control for the two rules above."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import torch\nfrom inference.model.quant import QuantEmbedding\n"
        "def f(model):\n    return engine_for(model).model.embed.weight.shape, stepper.engine\n"
    )
    assert {"torch", "inference.model.quant"} <= set(_imports_of(planted))
    reached = _reaches(_attribute_chains(planted))
    assert "().model.embed.weight.shape" in reached and "stepper.engine" in reached
    assert _reaches({"client.info.embedding_shape", "models.current", "st.session_state"}) == []


def _names_from_inference_beyond_the_seam(path: Path) -> list[str]:
    """The names ``path`` imports from ``inference`` modules other than ``inference.api`` (``import inference.x``
    counts as one)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "inference":
            if node.module != "inference.api":
                found += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "inference" and a.name != "inference.api"]
    return found


def test_the_ui_reaches_the_engine_only_through_the_backend_seam():
    """``pages/``, ``ui/`` and ``app.py`` import from ``inference`` only ``inference.api`` (the ``Backend`` Protocol,
    its records and helpers), and reach no private attribute of a backend (``client._engine``)."""
    offenders = []
    for path in _ui_files():
        name = str(path.relative_to(ROOT))
        offenders += [f"{name} imports {found}" for found in _names_from_inference_beyond_the_seam(path)]
        offenders += [
            f"{name} reads {chain}"
            for chain in _attribute_chains(path)
            if "._engine" in chain or re.search(r"client[a-z_]*\._", chain) or chain.startswith("()._")
        ]
    assert not offenders, offenders


def test_the_seam_check_sees_an_import_beyond_it(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import inference.serving\nfrom inference import SamplingParams\nfrom inference.api import Backend\n"
        "from inference.inspection import recorded_draw, draw_ids\n"
    )
    assert _names_from_inference_beyond_the_seam(planted) == [
        "inference.serving",
        "inference.SamplingParams",
        "inference.inspection.recorded_draw",
        "inference.inspection.draw_ids",
    ]
