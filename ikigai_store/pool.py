"""Connections: single ones, databases made over one, and the store's pools that fail fast.

Owns ``connect`` / ``aconnect`` (one connection; a failure becomes ``ConnectError`` with the
password redacted), ``create_database`` / ``drop_database`` (identifier DDL on a server, the only
SQL not in ``queries/``), and ``Pool`` (threads) and ``AsyncPool`` (asyncio) on psycopg_pool's
``ConnectionPool`` and ``AsyncConnectionPool``: autocommit, dict-row connections to one database.
The pools are thin shells over one sans-I/O checkout (``_BasePool._checkout``, a generator like
``ops``' operations): it holds the state and makes every decision below; a shell only carries out
its steps (probe, hook, renew, take), on a thread or on the event loop. Invariants of the pools:
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
- nothing is printed: psycopg_pool's warnings go to ``logging`` only;
- every pooled connection keeps the wake-ups of its writes for after their commit
  (``wake_after_commit``, migration 0032): ``ops`` sends them (``ops.WAKES_NOTICE``);
- every pooled connection sends list parameters as binary arrays (``_binary_lists``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import DictRow, dict_row
from psycopg.types.array import ListBinaryDumper
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout

from .config import redact, scrub
from .errors import ConnectError, StoreClosed, first_line, translate_errors
from .models import decode_json
from .ops import watch_wakes
from .sql import queries

__all__ = [
    "AConn",
    "AsyncPool",
    "Conn",
    "Pool",
    "aconnect",
    "connect",
    "create_database",
    "drop_database",
]

# psycopg_pool reports outages (a discarded broken connection, failed reconnections) as
# warnings on this logger. They reach the application's logging like any library's; without a
# handler configured, Python's last-resort handler would print them to stderr in the middle of
# a REPL, so the library gives them a NullHandler (the convention for library loggers).
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

Conn = psycopg.Connection[DictRow]
AConn = psycopg.AsyncConnection[DictRow]
P = TypeVar("P", ConnectionPool[Conn], AsyncConnectionPool[AConn])
C = TypeVar("C", Conn, AConn)


def connect(url: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """Open one connection, raising ``ConnectError`` (with the password redacted) on failure."""
    try:
        return psycopg.connect(url, **kwargs)
    except psycopg.Error as exc:
        raise _cannot_connect(url, exc) from exc


async def aconnect(url: str, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
    """``connect`` for asyncio."""
    try:
        return await psycopg.AsyncConnection.connect(url, **kwargs)
    except psycopg.Error as exc:
        raise _cannot_connect(url, exc) from exc


#: libpq's connection failures carry no SQLSTATE: the server's answers, by their message (an
#: English server; a localised one's count as outages, as before): its refusals, and "not yet"
#: (crash recovery, start-up: 57P03).
_ANSWERS = (
    (
        re.compile(r"FATAL:\s+the database system is (starting up|in recovery mode|not yet)"),
        "57P03",
    ),
    (re.compile(r"FATAL:\s+password authentication failed"), "28P01"),
    (re.compile(r"FATAL:\s+.*authentication failed"), "28000"),
    (re.compile(r"FATAL:\s+no pg_hba\.conf entry"), "28000"),
    (re.compile(r'FATAL:\s+role ".*" does not exist'), "28000"),
    (re.compile(r'FATAL:\s+database ".*" does not exist'), "3D000"),
)


def _cannot_connect(url: str, exc: psycopg.Error) -> ConnectError:
    text = str(exc)
    sqlstate = exc.sqlstate or next((code for rx, code in _ANSWERS if rx.search(text)), None)
    return ConnectError(
        f"cannot connect to {redact(url)}: {scrub(first_line(exc), url)}", sqlstate=sqlstate
    )


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


class _Do(enum.Enum):
    """A step of a checkout that waits on something (besides ``_Take``); shells carry them out."""

    PROBE = "make one connection outside the pool and close it (ConnectError if none)"
    HOOK = "call on_unavailable (blocking), which may bring the server back"
    RENEW = "replace the pool by a fresh one, unless the store closed or that happened meanwhile"


@dataclass(frozen=True)
class _Take(Generic[P]):
    """A step of a checkout: a connection from ``pool`` (waits at most ``timeout``)."""

    pool: P


#: A checkout: yields steps, receives each one's result (or its exception, thrown in), returns
#: the pool and the connection taken from it.
_Checkout = Generator[_Do | _Take[P], Any, tuple[P, C]]


class _BasePool(Generic[P, C]):
    """What ``Pool`` and ``AsyncPool`` share: options, state and every decision, without I/O.

    ``_checkout`` is the whole checkout written once (a closed store, an outage after a lost
    connection, a pool renewed meanwhile, a timeout); a shell only carries out its steps, on a
    thread or on the event loop.
    """

    _name = "ikigai_store"

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
        self._closed = False
        self._suspect = False
        self._pool: P | None = None

    def mark_suspect(self) -> None:
        """A connection was lost: check the server before the next checkout trusts the pool."""
        self._suspect = True

    def _pool_options(self) -> dict[str, Any]:
        """psycopg_pool's arguments (the shell adds the connection class and ``configure``)."""
        return {
            "conninfo": self._conninfo,
            "kwargs": {"autocommit": True, "row_factory": dict_row},
            "min_size": 1,
            "max_size": self._max_size,
            "timeout": self._timeout,
            "name": self._name,
            "open": False,
        }

    def _probe_options(self) -> dict[str, Any]:
        """A probe's connection: like a pooled one, and given up after ``timeout`` (>= 1 s)."""
        return {
            "autocommit": True,
            "row_factory": dict_row,
            "connect_timeout": max(1, round(self._timeout)),
        }

    def _checkout(self) -> _Checkout[P, C]:
        """A connection and the pool it came from (to give it back to). Returns only after a
        ``_Take`` succeeded; raises ``StoreClosed`` or ``ConnectError`` (or the hook's error)."""
        pool = yield from self._trusted()
        while True:
            try:
                conn: C = yield _Take(pool)
                return pool, conn
            except PoolClosed:
                if self._closed:
                    raise StoreClosed("the store is closed") from None
                if pool is self._pool:
                    raise
                pool = yield from self._trusted()  # renewed after an outage while this one waited
            except PoolTimeout:
                try:
                    yield _Do.PROBE
                except ConnectError:
                    self._suspect = True  # the server is down, not merely busy
                    raise
                raise ConnectError(
                    f"no database connection became free within {self._timeout:g} s "
                    f"(all {self._max_size} in use; raise pool_size or timeout)"
                ) from None

    def _trusted_now(self) -> P | None:
        """The pool a checkout would take from at once (its first step), or None when the
        checkout has something to do first (after a lost connection) or will refuse."""
        if self._closed or self._suspect:
            return None
        return self._pool

    def _first_step(
        self, checkout: _Checkout[P, C], tried: P | None, failed: Exception | None
    ) -> _Do | _Take[P]:
        """Start ``checkout``; when a take from ``tried`` already failed with ``failed`` (the
        shell's fast path) and the checkout's first step is that same take, its failure is
        what the checkout handles (a timeout is not waited for twice)."""
        step = next(checkout)
        if failed is not None and isinstance(step, _Take) and step.pool is tried:
            step = checkout.throw(failed)
        return step

    def _trusted(self) -> Generator[_Do, Any, P]:
        """The pool to take from; after a lost connection only once the server answers, and a
        fresh one (the old one's connections died with the server)."""
        if self._closed or self._pool is None:
            raise StoreClosed("the store is closed")
        if self._suspect:
            try:
                yield _Do.PROBE
            except ConnectError:
                if self._on_unavailable is None:
                    raise  # still down: fail now, stay suspect
                yield _Do.HOOK  # e.g. restart the embedded server
                yield _Do.PROBE
            yield _Do.RENEW
        return self._pool

    def _call_hook(self) -> None:
        """Step ``HOOK`` (yielded only when there is a hook)."""
        if self._on_unavailable is not None:
            self._on_unavailable()

    def _must_renew(self) -> bool:
        """Step ``RENEW``, under the shell's lock: whether this checkout replaces the pool."""
        return self._suspect and not self._closed

    def _renew(self, new: P) -> P:
        """Install ``new`` (the server answers again); the old pool, for the shell to close."""
        old, self._pool, self._suspect = self._pool, new, False
        assert old is not None  # RENEW follows _trusted, which found one
        return old


class Pool(_BasePool[ConnectionPool[Conn], Conn]):
    """Up to ``max_size`` connections to ``conninfo``; see the module docstring."""

    def __init__(
        self,
        conninfo: str,
        *,
        max_size: int,
        timeout: float,
        on_unavailable: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(
            conninfo, max_size=max_size, timeout=timeout, on_unavailable=on_unavailable
        )
        self._lock = threading.Lock()
        self.probe().close()  # a bad URL or a down server fails here, with libpq's reason
        self._pool = self._new_pool()

    def _new_pool(self) -> ConnectionPool[Conn]:
        pool = ConnectionPool(connection_class=Conn, configure=_configure, **self._pool_options())
        pool.open(wait=False)
        return pool

    def probe(self) -> Conn:
        """One new connection outside the pool; ``ConnectError`` with libpq's reason if none."""
        conn: Conn = connect(self._conninfo, **self._probe_options())
        return conn

    def connection(self) -> _Held:
        """A connection for the duration of the block, returned to its pool afterwards."""
        return _Held(self)

    def _take(self) -> tuple[ConnectionPool[Conn], Conn]:
        """Carry out the checkout's steps on this thread: (the pool, a connection of it)."""
        pool, failed = self._trusted_now(), None
        if pool is not None:  # the usual case, without the checkout's generators
            try:
                return pool, pool.getconn()
            except Exception as exc:  # the checkout says what it means
                failed = exc
        checkout = self._checkout()
        step = self._first_step(checkout, pool, failed)
        while True:
            try:
                result = self._do(step)
            except Exception as exc:
                step = checkout.throw(exc)
                continue
            try:
                step = checkout.send(result)
            except StopIteration as done:
                taken: tuple[ConnectionPool[Conn], Conn] = done.value
                return taken

    def _do(self, step: _Do | _Take[ConnectionPool[Conn]]) -> Conn | None:
        match step:
            case _Take(pool):
                return pool.getconn()
            case _Do.PROBE:
                self.probe().close()
            case _Do.HOOK:
                self._call_hook()
            case _Do.RENEW:
                with self._lock:
                    if self._must_renew():
                        _close_in_background(self._renew(self._new_pool()))
        return None

    def close(self) -> None:
        """Close every connection and refuse new checkouts. Idempotent."""
        with self._lock:
            self._closed = True
            pool = self._pool
        if pool is not None:
            pool.close()


class AsyncPool(_BasePool[AsyncConnectionPool[AConn], AConn]):
    """``Pool`` for asyncio: the same invariants and checkout, on ``AsyncConnectionPool``.

    Create it with ``await AsyncPool.create(...)`` (the pool opens inside the running loop).
    """

    _name = "ikigai_store_async"

    def __init__(
        self,
        conninfo: str,
        *,
        max_size: int,
        timeout: float,
        on_unavailable: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(
            conninfo, max_size=max_size, timeout=timeout, on_unavailable=on_unavailable
        )
        self._lock = asyncio.Lock()
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
        pool = AsyncConnectionPool(
            connection_class=AConn, configure=_aconfigure, **self._pool_options()
        )
        await pool.open(wait=False)
        return pool

    async def probe(self) -> AConn:
        """One new connection outside the pool; ``ConnectError`` with libpq's reason if none."""
        conn: AConn = await aconnect(self._conninfo, **self._probe_options())
        return conn

    def connection(self) -> _AHeld:
        """A connection for the duration of the block, returned to its pool afterwards."""
        return _AHeld(self)

    async def _take(self) -> tuple[AsyncConnectionPool[AConn], AConn]:
        """Carry out the checkout's steps on the event loop: (the pool, a connection of it)."""
        pool, failed = self._trusted_now(), None
        if pool is not None:  # the usual case, without the checkout's generators
            try:
                return pool, await pool.getconn()
            except Exception as exc:  # the checkout says what it means
                failed = exc
        checkout = self._checkout()
        step = self._first_step(checkout, pool, failed)
        while True:
            try:
                result = await self._do(step)
            except Exception as exc:
                step = checkout.throw(exc)
                continue
            try:
                step = checkout.send(result)
            except StopIteration as done:
                taken: tuple[AsyncConnectionPool[AConn], AConn] = done.value
                return taken

    async def _do(self, step: _Do | _Take[AsyncConnectionPool[AConn]]) -> AConn | None:
        match step:
            case _Take(pool):
                return await pool.getconn()
            case _Do.PROBE:
                await (await self.probe()).close()
            case _Do.HOOK:
                await asyncio.to_thread(self._call_hook)
            case _Do.RENEW:
                async with self._lock:
                    if self._must_renew():
                        old = self._renew(await self._new_pool())
                        self._closing = asyncio.ensure_future(old.close())
        return None

    async def close(self) -> None:
        """Close every connection and refuse new checkouts. Idempotent."""
        self._closed = True
        if self._closing is not None:
            await self._closing
        if self._pool is not None:
            await self._pool.close()


_WAKE_AFTER_COMMIT = queries.wake_after_commit.sql


def _configure(conn: Conn) -> None:
    """Every pooled connection decodes jsonb with ``decode_json`` (never fails on a row),
    sends list parameters as binary arrays (``_binary_lists``) and keeps its wake-ups for
    after the commit (``wake_after_commit``), told by the server's ``ops.WAKES_NOTICE``
    (``ops.watch_wakes``)."""
    set_json_loads(decode_json, conn)
    _binary_lists(conn)
    conn.execute(_WAKE_AFTER_COMMIT)
    watch_wakes(conn)


async def _aconfigure(conn: AConn) -> None:
    set_json_loads(decode_json, conn)
    _binary_lists(conn)
    await conn.execute(_WAKE_AFTER_COMMIT)
    watch_wakes(conn)


def _binary_lists(conn: Conn | AConn) -> None:
    """Send a ``list`` parameter as a binary array. psycopg's default for a list of strings
    is the text form, which searches every element for characters to quote: up to 43 µs for
    a 1 KB body (one without a space), against 0.3 µs in binary; a batch's client CPU fell by
    a third (``scripts/bench_batches.py``). Every array parameter of ``queries/`` is cast to
    its type (or compared with a column), so the values the server gets are the same."""
    conn.adapters.register_dumper(list, ListBinaryDumper)


def _close_in_background(pool: ConnectionPool[Conn]) -> None:
    """Close a replaced pool without making the caller wait for its worker threads."""
    threading.Thread(target=pool.close, name="ikigai_store-close-pool", daemon=True).start()


class _Held:
    """``Pool.connection()``: a plain context manager (it runs on every call of every
    operation, where ``@contextmanager``'s generator costs microseconds)."""

    __slots__ = ("_conn", "_owner", "_pool")

    def __init__(self, owner: Pool) -> None:
        self._owner = owner

    def __enter__(self) -> Conn:
        self._pool, self._conn = self._owner._take()
        return self._conn

    def __exit__(self, *exc_info: object) -> None:
        self._pool.putconn(self._conn)


class _AHeld:
    """``AsyncPool.connection()``: ``_Held`` for asyncio."""

    __slots__ = ("_conn", "_owner", "_pool")

    def __init__(self, owner: AsyncPool) -> None:
        self._owner = owner

    async def __aenter__(self) -> AConn:
        self._pool, self._conn = await self._owner._take()
        return self._conn

    async def __aexit__(self, *exc_info: object) -> None:
        await self._pool.putconn(self._conn)
