"""The house's shape (STYLE, "Layers you can see"): ``sweep/`` subpackages import only the layers
below them, no module imports itself back through others, and no module or function is too long.

Imports are read with :mod:`ast` (those inside functions too), so the check needs nothing imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Lowest first: a module may import from its own layer and the layers before it.
LAYERS = ("errors", "inputs", "output", "reduce", "engine", "answers", "trust", "api", "cli")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted((ROOT / "sweep").rglob("*.py"))}


def imports(path: Path) -> set[str]:
    """The ``sweep`` modules a file imports (``from sweep.x import y`` counts ``sweep.x.y`` when
    that is a module, else ``sweep.x``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "sweep":
            subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            found |= subs or {node.module}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "sweep"}
    return found & MODULES.keys()


GRAPH = {name: imports(path) - {name} for name, path in MODULES.items()}


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 else len(LAYERS)  # the package itself: on top


def test_the_layers_cover_every_subpackage():
    subpackages = {p.parent.name for p in (ROOT / "sweep").glob("*/__init__.py")}
    modules = {p.stem for p in (ROOT / "sweep").glob("*.py") if p.stem != "__init__"}
    assert subpackages | modules <= set(LAYERS), (subpackages | modules) - set(LAYERS)


def upward(graph: dict[str, set[str]], module: str) -> set[str]:
    """The modules ``module`` imports from a higher layer."""
    return {m for m in graph[module] if layer(m) > layer(module)}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            if cycle := visit(nxt, [*path, node]):
                return cycle
        done.add(node)
        return None

    for name in sorted(graph):
        if cycle := visit(name, []):
            return cycle
    return None


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_go_only_downward(module):
    assert not upward(GRAPH, module), f"{module} imports a higher layer: {sorted(upward(GRAPH, module))}"


def test_no_import_cycle():
    assert find_cycle(GRAPH) is None


def test_the_checks_see_a_cycle_and_an_upward_import():
    """The two checks above can fail: a made-up graph with both faults."""
    graph = {
        "sweep.inputs.models": {"sweep.inputs.architectures"},
        "sweep.inputs.architectures": {"sweep.inputs.models"},
        "sweep.output.store": {"sweep.engine.run"},
        "sweep.engine.run": {"sweep.output.store"},
    }
    assert find_cycle(graph) == ["sweep.engine.run", "sweep.output.store", "sweep.engine.run"]
    assert upward(graph, "sweep.output.store") == {"sweep.engine.run"}
    assert upward(graph, "sweep.engine.run") == set()
    assert find_cycle({"sweep.cli.main": {"sweep.api"}, "sweep.api": set()}) is None


@pytest.mark.parametrize(
    "path",
    sorted([*(ROOT / "sweep").rglob("*.py"), *(ROOT / "kernels").rglob("*.py")]),
    ids=lambda p: module_name(p),
)
def test_modules_and_functions_fit_on_a_few_screens(path):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, long
