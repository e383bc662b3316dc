"""The package's import graph has no cycle: every module can be read (and loaded) after the ones
it imports.

The graph is read from the source with ``ast``: an import inside a function counts (hiding an
import in a function keeps the cycle, it only moves the failure to run time); an import under
``if TYPE_CHECKING:`` does not (it never runs). Importing a module's own parent package is how
Python loads a submodule, not an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ikigai_store"

#: importer -> imported -> line numbers of the import statements
Graph = dict[str, dict[str, list[int]]]


def module_names(package: Path) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (a package by its ``__init__.py``)."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at any depth, except under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for other in node.orelse:
                yield from _imports_in(other)
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _imports(node)


def _imported(name: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The package modules ``node``, found in module ``name``, imports."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    base = node.module or ""
    if node.level:
        here = name.split(".") if modules[name].name == "__init__.py" else name.split(".")[:-1]
        anchor = here[: len(here) - (node.level - 1)]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
    found = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in modules:
            found.add(f"{base}.{alias.name}")  # from . import store: the submodule
        elif base in modules:
            found.add(base)  # from .store import Store: the module
    return found


def import_graph(package: Path) -> Graph:
    """Who imports whom inside ``package``, with the lines that do it."""
    modules = module_names(package)
    graph: Graph = {}
    for name, path in modules.items():
        edges: dict[str, list[int]] = {}
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _imported(name, node, modules):
                if target == name or name.startswith(target + "."):
                    continue  # itself, or its own parent package (loaded before it anyway)
                edges.setdefault(target, []).append(node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The groups of modules that import each other (directly or around a ring), each sorted."""
    return sorted(sorted(group) for group in _strongly_connected(graph))


def _strongly_connected(graph: Graph) -> list[set[str]]:
    """Tarjan's algorithm, iterative; only groups of two or more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def _shortest_cycle(graph: Graph, group: set[str], start: str) -> list[str]:
    """Breadth-first from ``start`` back to it, inside ``group``."""
    paths = [[start]]
    seen = {start}
    while paths:
        path = paths.pop(0)
        for target in sorted(graph[path[-1]]):
            if target == start:
                return [*path, start]
            if target in group and target not in seen:
                seen.add(target)
                paths.append([*path, target])
    raise AssertionError(f"{start} is in a cycle but none leads back to it")


def describe(graph: Graph, group: list[str]) -> str:
    """A shortest ring through the group, then every import inside it with its lines."""
    ring = _shortest_cycle(graph, set(group), group[0])
    edges = [
        f"    {a} (line {', '.join(map(str, lines))}) imports {b}"
        for a in group
        for b, lines in sorted(graph[a].items())
        if b in group
    ]
    return "\n".join(["  " + " -> ".join(ring), *edges])


def test_package_has_no_import_cycles() -> None:
    """No module of ikigai_store imports itself through others (function-level imports count)."""
    graph = import_graph(PACKAGE)
    found = cycles(graph)
    assert not found, f"{len(found)} import cycle(s) in ikigai_store:\n" + "\n".join(
        describe(graph, group) for group in found
    )


def test_checker_sees_function_imports_and_skips_type_checking(tmp_path: Path) -> None:
    """A cycle closed by a function-level import is found; one closed under TYPE_CHECKING is not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from .a import A\n",
        "a.py": "from . import b\nA = 1\n",
        "b.py": "def f():\n    from .sub.c import C\n    return C\n",
        "sub/__init__.py": "",
        "sub/c.py": "import pkg.a\nC = 2\n",
        "d.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from .e import E\nelse:\n    from . import a\n"
        ),
        "e.py": "from .d import *\nE = 3\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = import_graph(package)
    assert "pkg" not in graph["pkg.a"]  # its own package is not an edge
    assert graph["pkg.d"] == {"pkg.a": [5]}  # the else branch of TYPE_CHECKING counts
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    assert (
        describe(graph, cycles(graph)[0]).splitlines()[0]
        == "  pkg.a -> pkg.b -> pkg.sub.c -> pkg.a"
    )
