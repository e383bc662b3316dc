"""The ``ikigai-store`` console script: the commands an agent runs on every event (``hook NAME``,
and ``mcp`` over stdio) go straight to their thin clients, importing only the standard library;
every other command line goes to the click CLI (``ikigai_store.cli``).

A command line the fast path does not understand exactly (``--help``, an unknown option, a bad
value) goes to click too, which parses it and says what is wrong; so both paths accept the same
command lines. ``IKIGAI_SERVICE=off`` sends everything to click (the hooks then run in-process).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

_MAX_AUTO_RESERVE = 86400.0
_AUTO_RESERVE_DEFAULT = 300.0  # claude.AUTO_RESERVE_SECONDS (a test keeps them equal)
_HOOKS = frozenset({"session-start", "prompt", "stop", "post-tool", "pre-tool"})


def _value(args: list[str], i: int, option: str) -> tuple[str, int] | None:
    """The value of ``option`` at ``args[i]`` (``--opt=V`` or ``--opt V``) and the next index."""
    word = args[i]
    if word.startswith(option + "="):
        return word[len(option) + 1 :], i + 1
    if word == option and i + 1 < len(args) and not args[i + 1].startswith("-"):
        return args[i + 1], i + 2
    return None


def _seconds(text: str) -> float | None:
    try:
        seconds = float(text)
    except ValueError:
        return None
    return seconds if 0 < seconds <= _MAX_AUTO_RESERVE else None


def _database(args: list[str]) -> tuple[str | None, int] | None:
    """The global ``--database`` (if it comes first) and where the command starts."""
    if args and args[0].startswith("--database"):
        return _value(args, 0, "--database")
    return None, 0


def _fast_mcp(args: list[str], database: str | None) -> int | None:
    """Serve ``mcp [--as N] [--role R] [--project DIR] [--operator] [--tools SPEC]`` over stdio
    through the proxy; None for anything else (``--http``, ``--help``, ...)."""
    options: dict[str, str | bool | None] = {
        "name": os.environ.get("IKIGAI_AS") or None,
        "role": os.environ.get("IKIGAI_ROLE") or None,
        "project": None,
        "operator": False,
        "tools": "core",
    }
    i = 0
    while i < len(args):
        if args[i] == "--operator":
            options["operator"], i = True, i + 1
            continue
        for option, key in (
            ("--as", "name"),
            ("--role", "role"),
            ("--project", "project"),
            ("--tools", "tools"),
        ):
            found = _value(args, i, option) if args[i].startswith(option) else None
            if found is not None and found[0]:
                options[key], i = found
                break
        else:
            return None
    project = options["project"] or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    options["project"] = os.path.realpath(str(project))
    from .mcp.catalog import load, select_names

    try:
        select_names(
            str(options["tools"]), ((t["name"], t["area"], t["core"]) for t in load()["tools"])
        )
    except ValueError:
        return None  # click says what is wrong
    from .service import proxy

    return proxy.main(options, database=database)


def _fast_hook(args: list[str], database: str | None) -> int | None:
    """Run ``hook NAME [--as N] [--role R] [--auto-reserve [S]]`` through the service; None
    when the command line is anything else."""
    if not args or args[0] not in _HOOKS:
        return None
    hook = args[0]
    options: dict[str, str | float | None] = {"name": None, "role": None, "auto_reserve": None}
    i = 1
    while i < len(args):
        word = args[i]
        if word.startswith("--auto-reserve") and hook == "pre-tool":
            if word == "--auto-reserve" and (i + 1 == len(args) or args[i + 1].startswith("-")):
                options["auto_reserve"], i = _AUTO_RESERVE_DEFAULT, i + 1
                continue
            found = _value(args, i, "--auto-reserve")
            seconds = _seconds(found[0]) if found is not None else None
            if found is None or seconds is None:
                return None
            options["auto_reserve"], i = seconds, found[1]
            continue
        for option, key in (("--as", "name"), ("--role", "role")):
            found = _value(args, i, option) if word.startswith(option) else None
            if found is not None and found[0]:
                options[key], i = found
                break
        else:
            return None
    from .hooks import remote

    return remote.main(
        hook,
        database=database,
        name=options["name"],  # type: ignore[arg-type]
        role=options["role"],  # type: ignore[arg-type]
        auto_reserve=options["auto_reserve"],  # type: ignore[arg-type]
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``ikigai-store``, ``python -m ikigai_store``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    start = _database(args)
    from .service.client import enabled

    if start is not None and enabled():
        database, i = start
        command, rest = args[i : i + 1], args[i + 1 :]
        status = None
        if command == ["hook"]:
            status = _fast_hook(rest, database)
        elif command == ["mcp"]:
            status = _fast_mcp(rest, database)
        if status is not None:
            sys.exit(status)
    from .cli import main as cli_main

    cli_main(args)
