"""What every command group shares: opening the store, the offline outbox, standard input, the
active session, help without a command, and the common options.

Owns everything but output (``render``) and value types (``params``) that more than one
command module uses. Invariants:
- the store is opened only through ``open_store``, on the database named by the global
  ``--database`` option (or the configured default); with ``drain``, what waits in the offline
  outbox is delivered before the command's own operation;
- the outbox file is the global ``--outbox`` option, else the database's own
  (``outbox.database_path``): mail queued for one database is never delivered into another.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ..errors import ConnectError, DatabaseUnavailable, IkigaiStoreError
from ..models import Queued
from ..outbox import Outbox, database_path, default_path
from ..store import Store
from ..store import open as open_url
from .render import as_dict, json_text

__all__ = [
    "JSON_OPTION",
    "SESSION_OPTION",
    "active_or",
    "database_option",
    "deliver_or_queue",
    "echo_queued",
    "open_outbox",
    "open_store",
    "read_stdin",
    "show_help_without_command",
    "text_or_stdin",
]

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")

SESSION_OPTION = click.option(
    "--session",
    "-s",
    "session_id",
    type=int,
    default=None,
    metavar="ID",
    help="Session id (default: the active session).",
)


def show_help_without_command(ctx: click.Context) -> None:
    """A group run without a command prints its help (exit 0) rather than a usage error."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def _outbox_path() -> Path:
    """The offline outbox's file: the global ``--outbox`` option, else the database's own
    (``outbox.database_path``: one file per database, so mail queued for one is never
    delivered into another)."""
    path: str | None = click.get_current_context().find_root().params.get("outbox")
    return Path(path) if path else database_path(database_option())


def _legacy_notice() -> None:
    """Before 0.9 the CLI kept one outbox for every database (``default_path()``). Its waiting
    mail is not delivered into whatever database a command opens; say where it is."""
    legacy = default_path()
    if legacy == _outbox_path() or not legacy.exists():
        return
    waiting = Outbox(legacy).stats()
    count = waiting.get("pending", 0) + waiting.get("delivering", 0)
    if count:
        click.echo(
            f"outbox: {count} operation(s) wait in {legacy}, queued by an earlier version for "
            "any database; deliver them into theirs with `ikigai-store --database URL --outbox "
            f"{legacy} outbox drain`",
            err=True,
        )


def open_outbox() -> Outbox:
    """The offline outbox (its file is created on first use)."""
    return Outbox(_outbox_path())


def database_option() -> str | None:
    """The global ``--database`` option's URL (None: the configured default)."""
    url: str | None = click.get_current_context().find_root().params.get("database")
    return url


@contextmanager
def open_store(*, migrate: bool = True, drain: bool = True) -> Iterator[Store]:
    """Open the store named by the global ``--database`` option (or the configured default).

    With ``drain`` (and ``migrate``: the schema is known to be there), operations waiting in an
    existing outbox file are delivered first (a line on stderr says what happened), so they
    reach the database before this command's own."""
    with open_url(database_option(), migrate=migrate) as store:
        if drain and migrate:
            _legacy_notice()
        if drain and migrate and _outbox_path().exists():
            report = open_outbox().drain(store)
            if report.delivered or report.failed or report.expired:
                click.echo(
                    f"outbox: {report.delivered} delivered, {report.failed} failed, "
                    f"{report.expired} expired, {report.pending} still queued",
                    err=True,
                )
        try:
            yield store
        except IkigaiStoreError as exc:
            _as_typed(exc)
            raise


def _as_typed(exc: IkigaiStoreError) -> None:
    """Name the running command's options in ``exc``'s message as they are typed: the library
    names its parameters (``idempotency_key must be ...``, ``ttl must be ...``), the user
    typed ``--idempotency-key``, ``--ttl``. An option's name is replaced where it starts the
    message as the subject of "must" (a validation's wording: not ``session 5 does not
    exist``), and anywhere when it has an underscore (no word of a sentence looks like one)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or not exc.args or not isinstance(exc.args[0], str):
        return
    message = exc.args[0]
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or not param.name:
            continue
        flags = [o for o in param.opts if o.startswith("--")]
        if not flags:
            continue
        # Its Python name, and each flag's (``--ttl`` of an option kept as ``lease``).
        for name in {param.name, *(f[2:].replace("-", "_") for f in flags)}:
            pattern = rf"(?<![\w-]){name}(?![\w-])" if "_" in name else rf"^{name}(?= must )"
            message = re.sub(pattern, flags[0], message)
    exc.args = (message, *exc.args[1:])


def deliver_or_queue(operation: str, payload: dict[str, Any], key: str | None) -> Any:
    """Run a mail operation now, or, when the database cannot be reached, queue it in the
    outbox and return ``Queued`` (``Outbox.submit``)."""
    try:
        with open_store(drain=False) as store:
            return open_outbox().submit(store, operation, payload, idempotency_key=key)
    except DatabaseUnavailable as exc:
        if isinstance(exc, ConnectError) and exc.refused:
            raise  # a wrong password or database: an error, not an outage
        outbox = open_outbox()
        queued = outbox.get(outbox.enqueue(operation, payload, idempotency_key=key))
        return Queued(queued.idempotency_key, queued.operation, queued.expires_at)


def echo_queued(queued: Queued, as_json: bool) -> None:
    """What a command prints for an operation queued while offline."""
    if as_json:
        click.echo(json_text({"queued": True, **as_dict(queued)}, indent=2))
        return
    click.echo(f"queued (offline): {queued.idempotency_key}")
    click.echo(
        "the database cannot be reached; run `ikigai-store outbox drain` (or any command) "
        "once it can",
        err=True,
    )


def active_or(store: Store, session_id: int | None) -> int:
    """``session_id`` if given, else the active session; a clear error when there is none."""
    if session_id is not None:
        return session_id
    active = store.get_active_session()
    if active is None:
        raise click.ClickException(
            "no active session; start one with `ikigai-store session new` or pass --session ID"
        )
    return active


def read_stdin() -> str:
    """All of standard input, decoded as UTF-8 (a user error if it is not)."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise click.ClickException("standard input is not valid UTF-8 text") from None


def text_or_stdin(text: str) -> str:
    """``text``, or all of standard input when ``text`` is ``-``."""
    return read_stdin() if text == "-" else text
