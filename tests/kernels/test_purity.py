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
