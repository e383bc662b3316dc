"""Which database, how to reach it, and how driver errors become ours.

Owns URL resolution (argument, ``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded
server), password redaction, the embedded PostgreSQL lifecycle and ``translate_errors``, the one
place where psycopg exceptions are turned into ``ikigai_store.errors``.

The embedded server itself lives in ``embedded.py``; its public helpers are re-exported here.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row

from .embedded import default_data_dir as default_data_dir
from .embedded import embedded_server_url as embedded_server_url
from .embedded import embedded_url as embedded_url
from .embedded import testing_data_dir as testing_data_dir
from .errors import (
    ConnectError,
    ConnectionLost,
    DatabaseError,
    IkigaiStoreError,
    InvalidArgument,
)

Conn = psycopg.Connection[DictRow]

__all__ = [
    "EMBEDDED_DATABASE",
    "Pool",
    "admin_url",
    "create_database",
    "default_data_dir",
    "drop_database",
    "embedded_url",
    "redact",
    "resolve_url",
    "to_yoyo_url",
    "translate",
    "translate_errors",
]

logger = logging.getLogger("ikigai_store")

#: Name of the database the embedded server holds the store in.
EMBEDDED_DATABASE = "ikigai"

_URL_ENV = ("IKIGAI_DATABASE_URL", "DATABASE_URL")


def resolve_url(url: str | None = None) -> str | None:
    """Return the explicit or configured database URL, or None to mean "use the embedded server".

    Order: ``url``; ``IKIGAI_DATABASE_URL``; ``DATABASE_URL``. ``postgresql://`` and
    ``postgres://`` URLs and libpq ``key=value`` strings are accepted; a URL without a host lets
    libpq apply ``PGHOST``.
    """
    if url is not None:
        _check_url(url)
        return url
    for name in _URL_ENV:
        value = os.environ.get(name)
        if value:
            _check_url(value)
            return value
    return None


def _check_url(url: str) -> None:
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgument("database URL must be a non-empty string")
    if "://" in url and not url.startswith(("postgresql://", "postgres://")):
        scheme = url.split("://", 1)[0]
        raise InvalidArgument(
            f"unsupported database URL scheme {scheme!r}: use postgresql:// or postgres://"
        )


_URL_PASSWORD = re.compile(r"(://[^:/@?#]*:)[^@/?#]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)", re.IGNORECASE)


def redact(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (URL userinfo, query or key=value)."""
    url = _URL_PASSWORD.sub(lambda m: m.group(1) + "***@", url)
    return _KV_PASSWORD.sub(lambda m: m.group(1) + "***", url)


def to_yoyo_url(url: str) -> str:
    """The URL yoyo 9 needs to select psycopg 3: ``postgresql+psycopg://...``."""
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("postgres://"):
        return "postgresql+psycopg://" + url[len("postgres://") :]
    params = psycopg.conninfo.conninfo_to_dict(url)
    return "postgresql+psycopg://?" + urlencode({k: str(v) for k, v in params.items()})


def admin_url(url: str, dbname: str) -> str:
    """Same server and credentials as ``url``, another database."""
    params = psycopg.conninfo.conninfo_to_dict(url)
    params["dbname"] = dbname
    return psycopg.conninfo.make_conninfo("", **params)


def translate(exc: psycopg.Error, conn: psycopg.Connection[Any] | None) -> IkigaiStoreError:
    """The ``IkigaiStoreError`` for a psycopg error raised while using ``conn``.

    A dropped connection (server restart, ``pg_terminate_backend``) becomes ``ConnectionLost``.
    """
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) and (
        conn is None or conn.closed or conn.broken
    ):
        return ConnectionLost(f"database connection lost: {_first_line(exc)}")
    return DatabaseError(_first_line(exc))


@contextmanager
def translate_errors(conn: psycopg.Connection[Any] | None = None) -> Iterator[None]:
    """Turn psycopg errors raised inside the block into ``IkigaiStoreError`` subclasses."""
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc, conn) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def connect(url: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """Open one connection, raising ``ConnectError`` (with the password redacted) on failure."""
    try:
        return psycopg.connect(url, **kwargs)
    except psycopg.Error as exc:
        raise ConnectError(f"cannot connect to {redact(url)}: {redact(_first_line(exc))}") from exc


class Pool:
    """A small thread-safe pool of autocommit, dict-row connections to one database.

    Idle connections wait in a list; a semaphore bounds how many exist. There are no background
    threads and no per-checkout round trip: a connection is opened lazily, returned only when idle
    and healthy, and ``discard_idle`` drops the rest after an outage so the next call reconnects.
    (psycopg_pool costs ~30 us per checkout here, 8 % of an append; see scripts/bench.py.)
    """

    def __init__(self, url: str, *, max_size: int, timeout: float) -> None:
        self.url = url
        self._timeout = timeout
        self._idle: list[Conn] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_size)
        self._closed = False

    def get(self) -> Conn:
        """An idle connection, or a new one; ``ConnectError`` when none frees up in time."""
        if self._closed:
            raise ConnectError("the store is closed")
        if not self._slots.acquire(timeout=self._timeout):
            raise ConnectError(f"no free database connection after {self._timeout:g} s")
        try:
            with self._lock:
                if self._idle:
                    return self._idle.pop()
            return connect(
                self.url,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=max(1, round(self._timeout)),
            )
        except BaseException:
            self._slots.release()
            raise

    def put(self, conn: Conn) -> None:
        """Give a connection back; broken or mid-transaction ones are closed instead."""
        try:
            healthy = not conn.broken and conn.info.transaction_status == TransactionStatus.IDLE
            if healthy:
                with self._lock:
                    if not self._closed:
                        self._idle.append(conn)
                        return
            conn.close()
        finally:
            self._slots.release()

    def discard_idle(self) -> None:
        """Close every idle connection (after a connection loss they are likely dead too)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        """Close the idle connections and refuse new checkouts. Idempotent."""
        self._closed = True
        self.discard_idle()


def create_database(server_url: str, name: str) -> None:
    """``CREATE DATABASE name`` unless it exists (identifier DDL cannot take bind parameters)."""
    from .sql import queries

    with connect(server_url, autocommit=True) as conn, translate_errors(conn):
        if queries.database_exists(conn, name=name):
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
