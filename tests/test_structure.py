"""The package's shape: no import cycle between its modules, no source file too long to read, and
no source that tells the code's history instead of what it does.

Every module of ``scrapy_simhash/`` is parsed with :mod:`ast` (nothing is imported), and each
``import``/``from … import`` naming a module of the package becomes an edge: absolute and relative
imports, at module level and inside functions (an import on first use still runs: a cycle through
one works only as long as nobody imports the two modules in the other order). Imports under
``if TYPE_CHECKING:`` never run and are left out.

Every source file of the package counts against a line limit, whatever its language (Python,
Cython, Lua…); a file of a kind this module does not know fails the test until it is given a limit.
"""

from __future__ import annotations

import ast
import re
import tempfile
from pathlib import Path

import pytest

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
            for branch in node.orelse:
                visit(branch)
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


#: The line limit of each kind of source file in the package: the compiled engine's sources (``*.pyx``,
#: one module per concern, and their ``*.pxd``) get a little more room than the rest.
LINE_LIMITS = {".py": MAX_LINES, ".lua": MAX_LINES, ".pyx": MAX_COMPILED_LINES, ".pxd": MAX_COMPILED_LINES}
#: Files of the package that are no source: data, the PEP 561 marker, and what a build writes.
NOT_SOURCE = {".txt", ".typed", ".so", ".pyd", ".c", ".cpp", ".html", ".pyc"}


def package_files() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _too_long() -> dict[str, int]:
    sizes = {str(path.relative_to(REPO)): (len(path.read_text("utf-8").splitlines()), LINE_LIMITS[path.suffix])
             for path in package_files() if path.suffix in LINE_LIMITS}
    return {name: n for name, (n, limit) in sizes.items() if n > limit}


def test_every_file_of_the_package_is_a_source_with_a_limit_or_no_source() -> None:
    kinds = {path.suffix for path in package_files()}
    assert {".py", ".pyx", ".pxd"} <= kinds
    assert kinds - set(LINE_LIMITS) - NOT_SOURCE == set()


def test_no_source_file_over_its_line_limit() -> None:
    """600 lines for a Python or Lua file, 700 for a Cython one (``*.pyx``, ``*.pxd``)."""
    assert _too_long() == {}


# -- no history in the code ---------------------------------------------------------------------------

#: What tells the code's history or the lab's log rather than what the code does and why: an issue, a
#: round of work or a schema version by number, a citation of the benchmarks' log, a timing narrative.
#: The evidence for a tuned constant lives in ``docs/decisions/``, and the code points there.
HISTORY = re.compile(
    r"\bissues?\s*#?\d|\brounds?\s+\d|\bschemas?\s+\d|benchmarks/README|µs|\d(?:\.\d+)?\s*[x×]\s+(?:faster|slower)"
    r"|py-spy|callgrind|\bused to\b|\bbefore issue",
    re.IGNORECASE,
)
#: ``(file, the line's text)`` pairs that may match :data:`HISTORY` anyway. Empty: nothing needs it.
HISTORY_ALLOWED: set[tuple[str, str]] = set()


def history_files() -> list[Path]:
    """Every source outside ``tests/`` and ``benchmarks/`` (the lab's own log): the package, setup.py,
    the example project's code. The README and CHANGES.md are prose about releases, not code."""
    package = [p for p in package_files() if p.suffix in LINE_LIMITS]
    return [*package, REPO / "setup.py", *sorted((REPO / "example_project").rglob("*.py"))]


def history_lines(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        name = str(path.relative_to(REPO))
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if HISTORY.search(line) and (name, line.strip()) not in HISTORY_ALLOWED:
                found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_every_decision_record_is_in_the_index_and_every_citation_exists() -> None:
    """``docs/decisions/README.md`` lists every record; every ``docs/decisions/NNNN-….md`` the package
    cites is a record."""
    decisions = REPO / "docs" / "decisions"
    index = (decisions / "README.md").read_text("utf-8")
    records = {p.name for p in decisions.glob("[0-9][0-9][0-9][0-9]-*.md")}
    assert sorted(name for name in records if f"]({name})" not in index) == []
    cited = {m.group(1) for path in history_files() for m in re.finditer(r"docs/decisions/(\d{4}-[\w-]+\.md)",
                                                                         path.read_text("utf-8"))}
    assert sorted(cited - records) == []


def test_the_history_pattern_finds_what_it_is_for() -> None:
    for text in ("(issue 15)", "issues 18, 19", "round 4", "schema 5 → 6", "schemas 3–6", "see benchmarks/README.md",
                 "~0.27 µs", "1.4x faster on zh", "1.6× slower", "py-spy showed", "it used to read"):
        assert HISTORY.search(text), text
    for text in ("round(v, 2)", "schema_version", "a rounding error", "the issue is", "2 × 3 rows"):
        assert not HISTORY.search(text), text


def test_no_source_names_an_issue_a_round_or_a_schema_history() -> None:
    assert history_lines(history_files()) == []


def test_the_package_type_checks() -> None:
    """``py.typed`` ships, so the types are a promise: mypy (settings in pyproject.toml) finds no error."""
    mypy_api = pytest.importorskip("mypy.api", reason="mypy is in the [test] extra")
    with tempfile.TemporaryDirectory() as cache:
        out, err, status = mypy_api.run(["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", cache,
                                         str(ROOT)])
    assert status == 0, out + err
