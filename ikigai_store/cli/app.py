"""The root ``ikigai-store`` group: global options, error handling, opening the store.

Owns what every command shares. Invariant: user errors (every ``IkigaiStoreError``, bad JSON,
no active session) print one ``Error: ...`` line on stderr and exit with status 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from .. import __version__
from ..errors import IkigaiStoreError
from ..store import Store
from ..store import open as open_store

__all__ = ["SESSION_OPTION", "cli"]


class _Cli(click.Group):
    """The root group: turns library errors raised by any subcommand into ``Error: ...``."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except IkigaiStoreError as exc:
            # Our messages show URLs only through config.redact (tests/unit/test_urls.py).
            raise click.ClickException(str(exc) or type(exc).__name__) from exc


@contextmanager
def _store(*, migrate: bool = True) -> Iterator[Store]:
    """Open the store named by the global ``--database`` option (or the configured default)."""
    ctx = click.get_current_context()
    url: str | None = ctx.find_root().params.get("database")
    with open_store(url, migrate=migrate) as store:
        yield store


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


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--database",
    metavar="URL",
    default=None,
    help="PostgreSQL URL (postgresql://... or key=value). Default: $IKIGAI_DATABASE_URL, "
    "else $DATABASE_URL, else the embedded PostgreSQL started on demand.",
)
@click.version_option(__version__, prog_name="ikigai-store")
def cli(database: str | None) -> None:
    """ikigai-store: sessions, events, replay and search for LLM coding agents.

    Every command works on one database, chosen by --database. Commands other than `status` and
    `migrate` apply pending migrations first.

    For a guided tour of mark, rewind, clear, search and agent forks, run: ikigai-store demo
    """


SESSION_OPTION = click.option(
    "--session",
    "-s",
    "session_id",
    type=int,
    default=None,
    metavar="ID",
    help="Session id (default: the active session).",
)
