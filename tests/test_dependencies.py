"""`pip install .` brings every module the package imports: each import of hexfuse_onnx/ (found
with ast, lazy ones inside functions included, and what those import in turn) comes from the
standard library, a dependency declared in pyproject.toml, or what those require. Modules of an
optional extra (matplotlib, onnxruntime-qnn) may only be imported inside a function, where a
missing one becomes a message naming the extra."""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.slow  # a fresh interpreter imports the whole package and its dependencies

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hexfuse_onnx"


def _requirements() -> tuple[list[Requirement], dict[str, list[Requirement]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {k: [Requirement(r) for r in v] for k, v in project["optional-dependencies"].items()}
    return [Requirement(r) for r in project["dependencies"]], extras


def _closure(requirements: list[Requirement]) -> set[str]:
    """The distributions the requirements install: themselves and, recursively, what they require
    (extras of theirs left out, environment markers evaluated here)."""
    seen: set[str] = set()
    todo = list(requirements)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        with contextlib.suppress(metadata.PackageNotFoundError):  # not installed: only its name is checked
            todo += [Requirement(r) for r in metadata.requires(req.name) or []]
    return seen


def _imports() -> list[tuple[str, bool, str]]:
    """(module, at module level, file) of every absolute import in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(a.name, id(node) in top, path.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.module, id(node) in top, path.name))
    return found


def _package_modules() -> list[str]:
    """Every module of the package by its dotted name (not __main__, which runs the CLI)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] != "__main__":
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


@functools.cache
def _providers() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()  # scans every installed distribution: once


def _distributions(module: str) -> set[str]:
    top = module.split(".")[0]
    names = _providers().get(top, [top])
    return {canonicalize_name(n) for n in names}


def _loaded_by(modules: list[str]) -> set[str]:
    """Top-level names of the modules that importing `modules` loads in a fresh interpreter (not
    those its start-up loaded already, such as a site-packages .pth hook's)."""
    code = (
        "import importlib, json, sys\n"
        "before = {n.split('.')[0] for n in sys.modules}\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted({n.split('.')[0] for n in sys.modules} - before)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stdout))


def _external_imports() -> list[tuple[str, bool, str]]:
    outside = (*sys.stdlib_module_names, "hexfuse_onnx")
    return [(m, top, f) for m, top, f in _imports() if m.split(".")[0] not in outside]


@pytest.fixture(scope="module")
def declared() -> tuple[set[str], set[str]]:
    """The distributions `pip install .` brings, and those of the optional extras."""
    required, extras = _requirements()
    return _closure(required), {canonicalize_name(r.name) for reqs in extras.values() for r in reqs}


@pytest.fixture(scope="module")
def loaded(declared: tuple[set[str], set[str]]) -> dict[str, set[str]]:
    """Each top-level module (with its distributions) that importing every module of the package,
    and every lazy import that is not of an extra, loads."""
    allowed, optional = declared
    lazy = {m for m, top, _ in _external_imports() if not top and not _distributions(m) & (optional - allowed)}
    names = _loaded_by(_package_modules() + sorted(lazy)) - set(sys.stdlib_module_names) - {"hexfuse_onnx"}
    return {name: _distributions(name) for name in names if not name.startswith("_")}


def test_imports_come_from_declared_dependencies(declared: tuple[set[str], set[str]]) -> None:
    allowed, optional = declared
    for module, at_top, where in _external_imports():
        dists = _distributions(module)
        if dists & optional and not dists & allowed:
            assert not at_top, f"{where} imports {module} (an optional extra) at module level"
        else:
            assert dists & allowed, f"{where} imports {module}: no declared dependency provides it"


def test_what_the_imports_load_is_declared(declared: tuple[set[str], set[str]], loaded: dict[str, set[str]]) -> None:
    allowed, _ = declared
    undeclared = {name: dists for name, dists in loaded.items() if not dists & allowed}
    assert not undeclared, f"loaded but not declared in pyproject.toml (nor required by what is): {undeclared}"


def test_every_declared_dependency_is_used(loaded: dict[str, set[str]]) -> None:
    required, _ = _requirements()
    used = set().union(*loaded.values())
    unused = sorted(r.name for r in required if canonicalize_name(r.name) not in used)
    assert not unused, f"declared in pyproject.toml but never loaded by hexfuse_onnx: {unused}"
