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


def _seconds(text: str) -> float | None:
    try:
        seconds = float(text)
    except ValueError:
        return None
    return seconds if 0 < seconds <= _MAX_AUTO_RESERVE else None


def _parse(
    args: list[str],
    valued: dict[str, str],
    flags: dict[str, str] | None = None,
    optional: dict[str, str] | None = None,
) -> dict[str, str | bool] | None:
    """The options in ``args`` by key: ``valued`` take a value (``--opt V``, ``--opt=V``),
    ``flags`` none (True), ``optional`` one when it follows (else True). None when anything
    else is there (click then parses the line and says what is wrong)."""
    flags, optional = flags or {}, optional or {}
    found: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        option, eq, value = args[i].partition("=")
        takes_next = i + 1 < len(args) and not args[i + 1].startswith("-")
        if option in flags and not eq:
            found[flags[option]], i = True, i + 1
        elif option in valued or option in optional:
            key = valued.get(option) or optional[option]
            if eq:
                found[key], i = value, i + 1
            elif takes_next:
                found[key], i = args[i + 1], i + 2
            elif option in optional:
                found[key], i = True, i + 1
            else:
                return None
        else:
            return None
    return found


def _database(args: list[str]) -> tuple[str | None, int] | None:
    """The global ``--database`` (if it comes first) and where the command starts."""
    if not args or not args[0].startswith("--database"):
        return None, 0
    option, eq, value = args[0].partition("=")
    if option != "--database":
        return None
    if eq:
        return value, 1
    return (args[1], 2) if len(args) > 1 else None


def _fast_mcp(args: list[str], database: str | None) -> int | None:
    """Serve ``mcp [--as N] [--role R] [--project DIR] [--operator] [--tools SPEC]`` over stdio
    through the proxy; None for anything else (``--http``, ``--help``, ...)."""
    valued = {"--as": "name", "--role": "role", "--project": "project", "--tools": "tools"}
    found = _parse(args, valued, flags={"--operator": "operator"})
    if found is None:
        return None
    project = found.get("project") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    tools = str(found.get("tools") or "core")
    options = {
        "name": found.get("name") or os.environ.get("IKIGAI_AS") or None,
        "role": found.get("role") or os.environ.get("IKIGAI_ROLE") or None,
        "project": os.path.realpath(str(project)),
        "operator": found.get("operator") is True,
        "tools": tools,
    }
    from .mcp.catalog import load, select_names

    try:
        select_names(tools, ((t["name"], t["area"], t["core"]) for t in load()["tools"]))
    except ValueError:
        return None  # click says what is wrong
    from .service import proxy

    return proxy.main(options, database=database)


def _fast_hook(args: list[str], database: str | None) -> int | None:
    """Run ``hook NAME [--as N] [--role R] [--auto-reserve [S]]`` through the service; None
    when the command line is anything else."""
    if not args or args[0] not in _HOOKS:
        return None
    optional = {"--auto-reserve": "auto_reserve"} if args[0] == "pre-tool" else {}
    found = _parse(args[1:], {"--as": "name", "--role": "role"}, optional=optional)
    if found is None or "" in (found.get("name"), found.get("role")):
        return None
    reserve = found.get("auto_reserve")
    seconds = _AUTO_RESERVE_DEFAULT if reserve is True else _seconds(str(reserve or ""))
    if reserve is not None and seconds is None:
        return None
    from .hooks import remote

    name, role = found.get("name"), found.get("role")
    return remote.main(
        args[0],
        database=database,
        name=name if isinstance(name, str) else None,
        role=role if isinstance(role, str) else None,
        auto_reserve=seconds if reserve is not None else None,
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
