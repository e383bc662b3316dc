"""The CLI's modules share only public names (no database)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

import ikigai_store.cli as cli_package

CLI = Path(cli_package.__file__).resolve().parent


@contextmanager
def click_context(command: click.Command) -> Iterator[click.Context]:
    """A context of ``command`` (for calls that take one)."""
    with click.Context(command) as ctx:
        yield ctx


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


def test_command_modules_name_where_each_command_lives() -> None:
    """Every command of the root group is in COMMAND_MODULES under the module defining it, so
    the lazy lookup finds it, and help lists every command."""
    import importlib

    from ikigai_store.cli.app import COMMAND_MODULES, cli

    for module in set(COMMAND_MODULES.values()):
        importlib.import_module(f"ikigai_store.cli.{module}")
    defined = {name: cmd.callback.__module__ for name, cmd in cli.commands.items()}
    assert defined == {n: f"ikigai_store.cli.{m}" for n, m in COMMAND_MODULES.items()}
    with click_context(cli) as ctx:
        assert cli.list_commands(ctx) == sorted(COMMAND_MODULES)


def test_a_command_imports_only_its_module() -> None:
    """Running one command (`hook --help`) in a fresh interpreter imports no other command
    module."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ikigai_store.cli import main\n"
        "try:\n"
        "    main(['hook', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('ikigai_store.cli.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()[-1]
    assert out == str(
        [
            "ikigai_store.cli.app",
            "ikigai_store.cli.common",
            "ikigai_store.cli.hooks",
            "ikigai_store.cli.render",
        ]
    )
