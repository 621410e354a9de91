"""STYLE "Dependency direction": kernels/ imports only jax, numpy, typing, collections, __future__,
importlib and itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kernels

#: importlib: kernels/__init__.py imports its public names on first use (kernels.names needs no JAX);
#: collections: the registry's abstract types (collections.abc)
ALLOWED = {"jax", "numpy", "typing", "collections", "__future__", "importlib", "kernels"}
SOURCES = sorted(Path(kernels.__file__).resolve().parent.rglob("*.py"))


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            # A relative import (level > 0) stays inside kernels/.
            roots.add("kernels" if node.level else (node.module or "").split(".")[0])
    return roots


def test_sources_found():
    names = {p.relative_to(SOURCES[0].parent).as_posix() for p in SOURCES}
    assert {"__init__.py", "collectives.py", "network.py", "strategies/__init__.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_kernels_import_only_jax_and_numpy(path):
    assert imported_roots(path) <= ALLOWED, imported_roots(path) - ALLOWED


def test_the_checker_sees_forbidden_imports(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom click import echo\nfrom . import sibling\nimport jax.numpy as jnp\n")
    assert imported_roots(bad) == {"os", "click", "kernels", "jax"}


def kernels_imports(path: Path) -> set[str]:
    """The ``kernels`` modules a file imports at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kernels":
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "kernels"}
    return found


def test_kernels_have_no_import_cycle():
    """STYLE "Layers you can see": no kernels module imports itself back through others (the
    package's lazy ``__init__`` aside)."""
    root = SOURCES[0].parent
    name = lambda p: ".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")  # noqa: E731
    graph = {name(p): kernels_imports(p) - {"kernels"} for p in SOURCES if p.name != "__init__.py"}
    graph = {k: {m for m in v if m in graph} for k, v in graph.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(nxt == goal or reaches(nxt, goal, seen | {nxt}) for nxt in graph[start] - seen)

    cycles = [m for m in graph if reaches(m, m, set())]
    assert not cycles, cycles
    assert "kernels.network" not in graph["kernels.transformer"]
