"""The root ``ikigai-store`` group: global options, error handling, opening the store.

Owns what every command shares. Invariants:
- user errors (every ``IkigaiStoreError``, bad JSON, no active session) and usage errors (unknown
  option or command, missing argument, bad value) print one ``Error: ...`` line on stderr and
  exit with status 1, never a traceback or click's usage block; a command group given no command
  prints its help and exits 0;
- the free-text arguments of ``_TextArgs`` commands (``search`` QUERY, ``append`` CONTENT) may
  start with ``-``: an argument is an option only when it is one of the command's options or
  looks like a long option (``--word``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..errors import DatabaseUnavailable, IkigaiStoreError
from ..models import Queued
from ..outbox import Outbox, default_path
from ..store import Store
from ..store import open as open_store

__all__ = ["SESSION_OPTION", "cli"]


@contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    """Turn click's usage errors (exit 2 and a usage block) into one ``Error: ...`` line, exit 1."""
    try:
        yield
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "ikigai-store"
        message = " ".join(exc.format_message().split())
        raise click.ClickException(f"{message} (see: {where} --help)") from exc


class _Cli(click.Group):
    """The root group: library and usage errors of any subcommand become ``Error: ...``."""

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


class _TextArgs(click.Command):
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


def _show_help_without_command(ctx: click.Context) -> None:
    """A group run without a command prints its help (exit 0) rather than a usage error."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def _outbox_path() -> Path:
    """The offline outbox's file: the global ``--outbox`` option, else ``default_path()``."""
    path: str | None = click.get_current_context().find_root().params.get("outbox")
    return Path(path) if path else default_path()


def _outbox() -> Outbox:
    """The offline outbox (its file is created on first use)."""
    return Outbox(_outbox_path())


@contextmanager
def _store(*, migrate: bool = True, drain: bool = True) -> Iterator[Store]:
    """Open the store named by the global ``--database`` option (or the configured default).

    With ``drain`` (and ``migrate``: the schema is known to be there), operations waiting in an
    existing outbox file are delivered first (a line on stderr says what happened), so they
    reach the database before this command's own."""
    ctx = click.get_current_context()
    url: str | None = ctx.find_root().params.get("database")
    with open_store(url, migrate=migrate) as store:
        if drain and migrate and _outbox_path().exists():
            report = _outbox().drain(store)
            if report.delivered or report.failed or report.expired:
                click.echo(
                    f"outbox: {report.delivered} delivered, {report.failed} failed, "
                    f"{report.expired} expired, {report.pending} still queued",
                    err=True,
                )
        yield store


def _deliver_or_queue(operation: str, payload: dict[str, Any], key: str | None) -> Any:
    """Run a mail operation now, or, when the database cannot be reached, queue it in the
    outbox and return ``Queued`` (``Outbox.submit``)."""
    try:
        with _store(drain=False) as store:
            return _outbox().submit(store, operation, payload, idempotency_key=key)
    except DatabaseUnavailable:
        outbox = _outbox()
        queued = outbox.get(outbox.enqueue(operation, payload, idempotency_key=key))
        return Queued(queued.idempotency_key, queued.operation, queued.expires_at)


def _echo_queued(queued: Queued, as_json: bool) -> None:
    """What a command prints for an operation queued while offline."""
    if as_json:
        click.echo(
            json.dumps(
                {
                    "queued": True,
                    "operation": queued.operation,
                    "idempotency_key": queued.idempotency_key,
                    "expires_at": queued.expires_at.isoformat(),
                },
                indent=2,
            )
        )
        return
    click.echo(f"queued (offline): {queued.idempotency_key}")
    click.echo(
        "the database cannot be reached; run `ikigai-store outbox drain` (or any command) "
        "once it can",
        err=True,
    )


def _active_or(store: Store, session_id: int | None) -> int:
    """``session_id`` if given, else the active session; a clear error when there is none."""
    if session_id is not None:
        return session_id
    active = store.get_active_session()
    if active is None:
        raise click.ClickException(
            "no active session; start one with `ikigai-store session new` or pass --session ID"
        )
    return active


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
    _show_help_without_command(ctx)


SESSION_OPTION = click.option(
    "--session",
    "-s",
    "session_id",
    type=int,
    default=None,
    metavar="ID",
    help="Session id (default: the active session).",
)
