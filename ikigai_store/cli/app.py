"""The root ``ikigai-store`` group: global options, error handling, free-text arguments.

Owns how a command line is parsed and how its errors are reported. Invariants:
- user errors (every ``IkigaiStoreError``, bad JSON, no active session) and usage errors (unknown
  option or command, missing argument, bad value) print one ``Error: ...`` line on stderr and
  exit with status 1, never a traceback or click's usage block; a command group given no command
  prints its help and exits 0;
- the free-text arguments of ``TextArgs`` commands (``search`` QUERY, ``append`` CONTENT) may
  start with ``-``: an argument is an option only when it is one of the command's options or
  looks like a long option (``--word``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from .. import __version__
from ..errors import IkigaiStoreError
from .common import show_help_without_command

__all__ = ["COMMAND_MODULES", "TextArgs", "cli"]


@contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    """Turn click's usage errors (exit 2 and a usage block) into one ``Error: ...`` line, exit 1."""
    try:
        yield
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "ikigai-store"
        message = " ".join(exc.format_message().split())
        if isinstance(exc, click.NoSuchOption) and exc.option_name in _GLOBAL_OPTIONS:
            message += (
                f" {exc.option_name} is a global option, written before the command: "
                f"ikigai-store {exc.option_name} ... {where.removeprefix('ikigai-store ')}"
            )
        raise click.ClickException(f"{message} (see: {where} --help)") from exc


#: The options of ``ikigai-store`` itself, written before the command.
_GLOBAL_OPTIONS = frozenset({"--database", "--outbox"})


#: The module defining each command: imported the first time the command is looked up, so a
#: command (a hook, run on every prompt) imports its own module, not every one.
COMMAND_MODULES: dict[str, str] = {
    "activity": "activities",
    "lease": "activities",
    "migrate": "admin",
    "migrations-path": "admin",
    "status": "admin",
    "embedded": "admin",
    "citus": "admin",
    "agent": "agents",
    "demo": "demo",
    "export": "portability",
    "import": "portability",
    "append": "events",
    "replay": "events",
    "search": "events",
    "hook": "hooks",
    "hooks": "hooks",
    "identity": "identities",
    "mail": "mail",
    "mcp": "mcp",
    "outbox": "outbox",
    "review": "reviews",
    "plan": "reviews",
    "service": "service",
    "session": "sessions",
    "task": "tasks",
    "topic": "topics",
    "watch": "watch",
    "web": "web",
}


class _Cli(click.Group):
    """The root group: library and usage errors of any subcommand become ``Error: ...``;
    commands are loaded from their module (``COMMAND_MODULES``) when first looked up."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if cmd_name not in self.commands and module is not None:
            importlib.import_module(f"{__package__}.{module}")  # registers its commands
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMAND_MODULES})

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _one_line_usage_errors():  # the root's own options
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _one_line_usage_errors():  # subcommands' arguments, unknown commands
            try:
                return super().invoke(ctx)
            except IkigaiStoreError as exc:
                # Our messages show URLs only through config.redact (tests/unit/test_urls.py).
                raise click.ClickException(str(exc) or type(exc).__name__) from exc


#: A misspelt or unknown long option (``--sesion``): left to click, which names it.
_LONG_OPTION = re.compile(r"--[A-Za-z][\w-]*(=.*)?", re.DOTALL)


class TextArgs(click.Command):
    """A command whose positional arguments are free text that may start with ``-``.

    click reads every argument starting with ``-`` as an option, so ``search "-foo bar"`` or
    ``append user "--- a/x.c"`` would fail. Here an argument is an option only when it is one of
    the command's options (``-n 5``, ``--limit=5``, ``-n5``) or looks like a long option
    (``--word``, so that a misspelt option is still reported); every other argument is
    positional, wherever it stands. ``--`` still ends the options.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _positionals_last(ctx, self.get_params(ctx), args))


def _positionals_last(
    ctx: click.Context, params: Sequence[click.Parameter], args: Sequence[str]
) -> list[str]:
    """``args`` with the options (and their values) first, then ``--`` and the positionals."""
    options = {
        name: p
        for p in params
        if isinstance(p, click.Option)
        for name in (*p.opts, *p.secondary_opts)
    }
    head: list[str] = []
    positionals: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positionals.extend(args[i:])
            break
        option = options.get(arg)
        if option is not None:
            head.append(arg)
            if not (option.is_flag or option.count):
                head.extend(args[i : i + option.nargs])
                i += option.nargs
        elif _LONG_OPTION.fullmatch(arg) or _short_with_value(ctx, options, arg):
            head.append(arg)
        else:
            positionals.append(arg)
    return [*head, "--", *positionals] if positionals else head


def _short_with_value(ctx: click.Context, options: dict[str, click.Option], arg: str) -> bool:
    """True for ``-n5``: a short option of ours taking a value, glued to a valid value."""
    option = options.get(arg[:2])
    if len(arg) <= 2 or arg[1] == "-" or option is None or option.is_flag or option.count:
        return False
    try:
        option.type.convert(arg[2:], option, ctx)
    except click.BadParameter:
        return False
    return True


# ------------------------------------------------------------------------------------ commands


@click.group(
    "ikigai-store",
    cls=_Cli,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--database",
    metavar="URL",
    default=None,
    help="PostgreSQL URL (postgresql://..., postgresql+psycopg://... as yoyo spells it, or "
    "key=value). Default: $IKIGAI_DATABASE_URL, else $DATABASE_URL, else the embedded "
    "PostgreSQL started on demand.",
)
@click.option(
    "--outbox",
    metavar="PATH",
    envvar="IKIGAI_OUTBOX",
    default=None,
    help="The offline outbox file: mail sent while the database cannot be reached waits there "
    "(default: $IKIGAI_OUTBOX, else $XDG_STATE_HOME/ikigai_store/outbox.sqlite3).",
)
@click.version_option(__version__, prog_name="ikigai-store")
@click.pass_context
def cli(ctx: click.Context, database: str | None, outbox: str | None) -> None:
    """ikigai-store: sessions, events, replay and search for LLM coding agents.

    Every command works on one database, chosen by --database. Commands that use it, other than
    `status` and `migrate`, apply pending migrations first, then deliver what waits in the
    offline outbox. `mail send`, `mail reply` and `topic publish` queue there when the database
    cannot be reached ("queued (offline)").

    For a guided tour of mark, rewind, clear, search and agent forks, run: ikigai-store demo
    """
    show_help_without_command(ctx)
