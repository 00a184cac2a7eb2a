"""The package's shape: no import cycle between its modules, and no module too long to read.

Every module of ``scrapy_simhash/`` is parsed with :mod:`ast` (nothing is imported), and each
``import``/``from … import`` naming a module of the package becomes an edge: absolute and relative
imports, at module level and inside functions (an import on first use still runs: a cycle through
one works only as long as nobody imports the two modules in the other order). Imports under
``if TYPE_CHECKING:`` never run and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = "scrapy_simhash"
ROOT = REPO / PACKAGE
MAX_LINES = 600
MAX_COMPILED_LINES = 700


def module_names() -> dict[str, Path]:
    names = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module → the modules of the package it imports (a submodule named by ``from pkg import sub``
    counts as the submodule, anything else imported from a package as the package)."""
    modules = module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = name.split(".")
                    base = base[: len(base) - node.level + (1 if is_package else 0)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                           for alias in node.names]
            for target in targets:
                while target and target not in modules:  # ``import a.b.c`` of a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_graph_sees_relative_and_function_level_imports() -> None:
    graph = import_graph()
    assert "scrapy_simhash.index.base" in graph["scrapy_simhash.index"]  # from .base import …
    assert "scrapy_simhash.index.sqlite.index" in graph["scrapy_simhash.index"]  # inside open_index()
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def _too_long() -> dict[str, int]:
    sizes = {name: len(path.read_text("utf-8").splitlines()) for name, path in module_names().items()}
    return {name: n for name, n in sizes.items() if n > MAX_LINES}


def test_no_module_over_600_lines() -> None:
    assert _too_long() == {}


def test_no_compiled_module_over_700_lines() -> None:
    """The compiled engine's sources (``*.pyx``, one module per concern) and their ``.pxd`` files."""
    sizes = {path.name: len(path.read_text("utf-8").splitlines())
             for path in sorted([*ROOT.glob("*.pyx"), *ROOT.glob("*.pxd")])}
    assert any(name.endswith(".pyx") for name in sizes)
    assert {name: n for name, n in sizes.items() if n > MAX_COMPILED_LINES} == {}
