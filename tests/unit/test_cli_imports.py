"""The CLI's modules share only public names (no database)."""

from __future__ import annotations

import ast
from pathlib import Path

import ikigai_store.cli as cli_package

CLI = Path(cli_package.__file__).resolve().parent


def private_imports(source: str) -> list[str]:
    """``.module:_name`` for every ``from .module import _name`` (relative imports only)."""
    return [
        f"{'.' * node.level}{node.module or ''}:{alias.name}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.level > 0
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


def test_no_cli_module_imports_another_modules_private_names() -> None:
    """No ``from .x import _y`` anywhere in ikigai_store/cli/ (shared helpers are public)."""
    found = {p.name: private_imports(p.read_text()) for p in sorted(CLI.glob("*.py"))}
    assert len(found) > 10
    assert {name: names for name, names in found.items() if names} == {}


def test_the_import_check_sees_private_imports() -> None:
    """The check above would catch ``from .app import _store`` and ``from .. import _x``."""
    assert private_imports("from .app import _store, cli\nfrom .. import _x, __version__\n") == [
        ".app:_store",
        "..:_x",
    ]
