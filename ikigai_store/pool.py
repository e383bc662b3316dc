"""Connections: single ones, databases made over one, and the store's pools that fail fast.

Owns ``connect`` (one connection; a failure becomes ``ConnectError`` with the password redacted),
``create_database`` / ``drop_database`` (identifier DDL on a server, the only SQL not in
``queries/``), and ``Pool`` (threads) and ``AsyncPool`` (asyncio), the same design on
psycopg_pool's ``ConnectionPool`` and ``AsyncConnectionPool``: autocommit, dict-row connections to
one database. Invariants of the pools:
- waiting threads are served in FIFO order (psycopg_pool hands a returned connection to the
  oldest waiter), so a thread looping on the store cannot starve another one;
- a checkout waits at most ``timeout`` seconds and then raises ``ConnectError`` saying why:
  the server is unreachable (with libpq's reason) or every connection stayed busy;
- after a connection was lost (``mark_suspect``) the next checkout first makes one direct
  connection: while the server is down every call fails at once with ``ConnectError`` instead of
  waiting ``timeout`` on a pool that cannot connect (an ``on_unavailable`` hook, e.g. "restart
  the embedded server", gets one chance first); once the server answers, the pool is
  replaced by a fresh one (the old one's idle connections died with the server, and its
  background reconnection attempts may be backing off for minutes);
- a connection handed out is returned to the pool it came from; psycopg_pool closes broken ones
  and rolls back any that are left in a transaction;
- nothing is printed: psycopg_pool's warnings go to ``logging`` only.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout

from .config import redact, scrub
from .errors import ConnectError, StoreClosed, first_line, translate_errors
from .models import decode_json
from .sql import queries

__all__ = ["AConn", "AsyncPool", "Conn", "Pool", "connect", "create_database", "drop_database"]

# psycopg_pool reports outages (a discarded broken connection, failed reconnections) as
# warnings on this logger. They reach the application's logging like any library's; without a
# handler configured, Python's last-resort handler would print them to stderr in the middle of
# a REPL, so the library gives them a NullHandler (the convention for library loggers).
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

Conn = psycopg.Connection[DictRow]
AConn = psycopg.AsyncConnection[DictRow]


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


class Pool:
    """Up to ``max_size`` connections to ``conninfo``; see the module docstring."""

    def __init__(
        self,
        conninfo: str,
        *,
        max_size: int,
        timeout: float,
        on_unavailable: Callable[[], object] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._max_size = max_size
        self._timeout = timeout
        self._on_unavailable = on_unavailable
        self._lock = threading.Lock()
        self._closed = False
        self._suspect = False
        self.probe().close()  # a bad URL or a down server fails here, with libpq's reason
        self._pool = self._new_pool()

    def _new_pool(self) -> ConnectionPool[Conn]:
        pool: ConnectionPool[Conn] = ConnectionPool(
            self._conninfo,
            connection_class=psycopg.Connection[DictRow],
            kwargs={"autocommit": True, "row_factory": dict_row},
            min_size=1,
            max_size=self._max_size,
            timeout=self._timeout,
            name="ikigai_store",
            configure=_configure,
            open=False,
        )
        pool.open(wait=False)
        return pool

    def probe(self) -> Conn:
        """One new connection outside the pool; ``ConnectError`` with libpq's reason if none."""
        conn: Conn = connect(
            self._conninfo,
            autocommit=True,
            row_factory=dict_row,
            connect_timeout=max(1, round(self._timeout)),
        )
        return conn

    def mark_suspect(self) -> None:
        """A connection was lost: check the server before the next checkout trusts the pool."""
        self._suspect = True

    def _current(self) -> ConnectionPool[Conn]:
        if self._closed:
            raise StoreClosed("the store is closed")
        if self._suspect:
            try:
                self.probe().close()
            except ConnectError:
                if self._on_unavailable is None:
                    raise  # still down: fail now, stay suspect
                self._on_unavailable()  # e.g. restart the embedded server
                self.probe().close()
            with self._lock:
                if self._suspect and not self._closed:
                    old, self._pool = self._pool, self._new_pool()
                    self._suspect = False
                    _close_in_background(old)
        return self._pool

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        """A connection for the duration of the block, returned to its pool afterwards."""
        pool = self._current()
        while True:
            try:
                conn = pool.getconn()
                break
            except PoolClosed:
                if self._closed:
                    raise StoreClosed("the store is closed") from None
                if pool is self._pool:
                    raise
                pool = self._pool  # replaced after an outage while this thread waited
            except PoolTimeout:
                try:
                    self.probe().close()
                except ConnectError:
                    self._suspect = True  # the server is down, not merely busy
                    raise
                raise _busy(self._timeout, self._max_size) from None
        try:
            yield conn
        finally:
            pool.putconn(conn)

    def close(self) -> None:
        """Close every connection and refuse new checkouts. Idempotent."""
        with self._lock:
            self._closed = True
            pool = self._pool
        pool.close()


def _configure(conn: Conn) -> None:
    """Every pooled connection decodes jsonb with ``decode_json`` (never fails on a row)."""
    set_json_loads(decode_json, conn)


async def _aconfigure(conn: AConn) -> None:
    set_json_loads(decode_json, conn)


def _close_in_background(pool: ConnectionPool[Conn]) -> None:
    """Close a replaced pool without making the caller wait for its worker threads."""
    threading.Thread(target=pool.close, name="ikigai_store-close-pool", daemon=True).start()


def _busy(timeout: float, max_size: int) -> ConnectError:
    return ConnectError(
        f"no database connection became free within {timeout:g} s "
        f"(all {max_size} in use; raise pool_size or timeout)"
    )


class AsyncPool:
    """``Pool`` for asyncio: the same invariants, on ``AsyncConnectionPool``.

    Create it with ``await AsyncPool.create(...)`` (the pool opens inside the running loop).
    """

    def __init__(
        self,
        conninfo: str,
        *,
        max_size: int,
        timeout: float,
        on_unavailable: Callable[[], object] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._max_size = max_size
        self._timeout = timeout
        self._on_unavailable = on_unavailable
        self._lock = asyncio.Lock()
        self._closed = False
        self._suspect = False
        self._pool: AsyncConnectionPool[AConn] | None = None
        self._closing: asyncio.Future[None] | None = None  # a replaced pool, closing

    @classmethod
    async def create(
        cls,
        conninfo: str,
        *,
        max_size: int,
        timeout: float,
        on_unavailable: Callable[[], object] | None = None,
    ) -> AsyncPool:
        """An open pool; ``ConnectError`` with libpq's reason when the server cannot be reached.

        ``on_unavailable`` (blocking; run in a worker thread) is ``Pool``'s hook."""
        self = cls(conninfo, max_size=max_size, timeout=timeout, on_unavailable=on_unavailable)
        await (await self.probe()).close()
        self._pool = await self._new_pool()
        return self

    async def _new_pool(self) -> AsyncConnectionPool[AConn]:
        pool: AsyncConnectionPool[AConn] = AsyncConnectionPool(
            self._conninfo,
            connection_class=psycopg.AsyncConnection[DictRow],
            kwargs={"autocommit": True, "row_factory": dict_row},
            min_size=1,
            max_size=self._max_size,
            timeout=self._timeout,
            name="ikigai_store_async",
            configure=_aconfigure,
            open=False,
        )
        await pool.open(wait=False)
        return pool

    async def probe(self) -> AConn:
        """One new connection outside the pool; ``ConnectError`` with libpq's reason if none."""
        try:
            conn: AConn = await psycopg.AsyncConnection.connect(
                self._conninfo,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=max(1, round(self._timeout)),
            )
        except psycopg.Error as exc:
            raise ConnectError(
                f"cannot connect to {redact(self._conninfo)}: "
                f"{scrub(first_line(exc), self._conninfo)}"
            ) from exc
        return conn

    def mark_suspect(self) -> None:
        """A connection was lost: check the server before the next checkout trusts the pool."""
        self._suspect = True

    async def _current(self) -> AsyncConnectionPool[AConn]:
        if self._closed or self._pool is None:
            raise StoreClosed("the store is closed")
        if self._suspect:
            try:
                await (await self.probe()).close()
            except ConnectError:
                if self._on_unavailable is None:
                    raise  # still down: fail now, stay suspect
                await asyncio.to_thread(self._on_unavailable)
                await (await self.probe()).close()
            async with self._lock:
                if self._suspect and not self._closed:
                    old, self._pool = self._pool, await self._new_pool()
                    self._suspect = False
                    self._closing = asyncio.ensure_future(old.close())
        return self._pool

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AConn]:
        """A connection for the duration of the block, returned to its pool afterwards."""
        pool = await self._current()
        while True:
            try:
                conn = await pool.getconn()
                break
            except PoolClosed:
                if self._closed:
                    raise StoreClosed("the store is closed") from None
                if pool is self._pool:
                    raise
                pool = await self._current()  # replaced after an outage while this task waited
            except PoolTimeout:
                try:
                    await (await self.probe()).close()
                except ConnectError:
                    self._suspect = True  # the server is down, not merely busy
                    raise
                raise _busy(self._timeout, self._max_size) from None
        try:
            yield conn
        finally:
            await pool.putconn(conn)

    async def close(self) -> None:
        """Close every connection and refuse new checkouts. Idempotent."""
        self._closed = True
        if self._closing is not None:
            await self._closing
        if self._pool is not None:
            await self._pool.close()
