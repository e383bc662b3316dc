"""The sync face: ``Store``, a pool of connections and every operation, for threads.

Owns the thread-facing side of a store: a pool of connections (``pool.Pool``), transactions,
migrations, and how the steps of an operation are carried out with threads (``_Steps``). The
operations themselves are defined once, in the area modules, and bound here by
``api.Operations`` (``store.append``, ``store.mail.send``, …); ``AsyncStore`` (``aio``) binds
the very same ones. Invariants:
- every public write is atomic: one statement, or one transaction; inside
  ``store.transaction()`` each operation runs in a savepoint, so a rejected write leaves the
  caller's transaction usable;
- bad input raises ``InvalidArgument`` before anything is written; no psycopg exception escapes
  (``errors.translate``); a dropped connection raises ``ConnectionLost`` and the pool checks the
  server before it trusts its connections again;
- the connection of ``store.transaction()`` is pinned in a ``ContextVar`` (per thread, and per
  asyncio task for the async face), never shared between threads;
- a waiting operation sleeps on the store's one listening connection (``notify.Listener``),
  never on a pooled one.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from . import migrate as _migrate
from . import ops
from .api import Operations
from .config import redact, resolve_url
from .embedded import default_data_dir, embedded_url
from .errors import ConnectionLost, IkigaiStoreError, InvalidArgument, NodeUnavailable, translate
from .notify import NOT_MINE, RETRY, Listener, Listening
from .ops import SyncFace
from .pool import Conn, Pool
from .validate import check_seconds

__all__ = ["Store", "open"]

T = TypeVar("T")


def check_pool_options(pool_size: object, timeout: object) -> None:
    """``InvalidArgument`` unless pool_size is a positive int and timeout a number of seconds."""
    if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
        raise InvalidArgument("pool_size must be a positive integer")
    check_seconds(timeout, "timeout")


def resolve_target(url: str | None) -> tuple[str, Path | None, Callable[[], object] | None]:
    """(URL, embedded data dir or None, hook restarting a dead embedded server or None).

    Starts the embedded server when no URL is given or configured (blocking).
    """
    resolved = resolve_url(url)
    if resolved is not None:
        return resolved, None, None
    data_dir = default_data_dir()
    return embedded_url(data_dir), data_dir, functools.partial(embedded_url, data_dir)


def open(
    url: str | None = None,
    *,
    migrate: bool = True,
    pool_size: int = 4,
    timeout: float = 10.0,
    migration_lock_timeout: float = 60.0,
) -> Store:
    """Open a store on ``url``, ``IKIGAI_DATABASE_URL``, ``DATABASE_URL`` or the embedded server.

    ``pool_size`` bounds the store's connections; a call waits at most ``timeout`` seconds for
    one (waiting threads are served first come, first served). With ``migrate=True`` (default)
    pending migrations are applied first; when another process is migrating, ``open`` waits up
    to ``migration_lock_timeout`` seconds for it. Raises ``ConnectError`` when the database
    cannot be reached and ``MigrationError`` when a migration fails or the wait times out.
    """
    check_pool_options(pool_size, timeout)
    check_seconds(migration_lock_timeout, "migration_lock_timeout")
    resolved, data_dir, revive = resolve_target(url)
    store = Store(resolved, pool_size=pool_size, timeout=timeout, on_unavailable=revive)
    store.embedded_data_dir = data_dir
    if migrate:
        try:
            store.migrate(lock_timeout=migration_lock_timeout)
        except BaseException:
            store.close()
            raise
    return store


class Store(SyncFace, Operations[SyncFace]):
    """A pool of connections to one ikigai database and the operations on it (thread-safe)."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        timeout: float = 10.0,
        on_unavailable: Callable[[], object] | None = None,
    ) -> None:
        """``on_unavailable()`` is called when the server cannot be reached after a connection
        was lost, then it is tried once more: the hook may bring the database back (``open()``
        passes one that restarts the embedded server) or raise."""
        check_pool_options(pool_size, timeout)
        Operations.__init__(self, self)
        self._conninfo = resolve_url(url) or ""
        self.embedded_data_dir: Path | None = None
        """Data directory of the embedded server this store runs on (None for other servers)."""
        self._pool = Pool(
            self._conninfo, max_size=pool_size, timeout=timeout, on_unavailable=on_unavailable
        )
        self._pinned: ContextVar[Conn | None] = ContextVar(f"ikigai_store_{id(self)}", default=None)
        self._listener = Listener(self._pool.probe)

    @property
    def url(self) -> str:
        """The database URL with its password masked (safe to print; see ``config.redact``)."""
        return redact(self._conninfo)

    def __repr__(self) -> str:
        return f"<Store {self.url}>"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection of the store. Idempotent."""
        self._listener.close()
        self._pool.close()

    # ---------------------------------------------------------------- running operations

    def _run(self, op: ops.Op[T]) -> T:
        atomic = ops.is_atomic(op)
        if not atomic and self._pinned.get() is None:
            # The common case, what _scope would do: a plain checkout, minus its generator.
            return ops.run(self._pool.connection, op, self._on_error, self._steps)
        return ops.run(lambda: self._scope(atomic), op, self._on_error, self._steps)

    def _steps(self) -> ops.Steps:
        return _Steps(self)

    @contextmanager
    def _scope(self, atomic: bool) -> Iterator[Conn]:
        """The connection for one stretch of an operation: the transaction's (in a savepoint),
        else a pooled autocommit one (in a transaction when the operation is atomic)."""
        pinned = self._pinned.get()
        if pinned is not None:
            with pinned.transaction():
                yield pinned
            return
        with self._pool.connection() as conn:
            if atomic:
                try:
                    with conn.transaction():
                        yield conn
                except BaseException:
                    ops.has_wakes(conn)  # rolled back: nothing to send
                    raise
                if ops.has_wakes(conn):  # committed: its wake-ups go now (ops.WAKES_NOTICE)
                    ops.send_committed_wakes(conn)
            else:
                yield conn

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        """Internal: a connection for raw SQL (the transaction's, in a savepoint, or a pooled
        autocommit one); psycopg errors raised in the block are translated. What the block's
        writes notify is sent after it (in autocommit) or at the transaction's commit."""
        pinned = self._pinned.get()
        with self._scope(False) as conn:
            try:
                yield conn
                if pinned is None and ops.has_wakes(conn):  # told by ops.WAKES_NOTICE
                    ops.send_wakes(conn)
            except psycopg.Error as exc:
                raise self._on_error(exc, conn) from exc

    def _on_error(self, exc: psycopg.Error, conn: Any) -> IkigaiStoreError:
        error = translate(exc, conn)
        if isinstance(error, ConnectionLost) and not isinstance(error, NodeUnavailable):
            self._pool.mark_suspect()  # the outage probably killed the idle ones too
        return error

    @contextmanager
    def transaction(self, *, force_rollback: bool = False) -> Iterator[Store]:
        """Group the store calls made inside the block (on this thread) into one transaction.

        Leaving the block normally commits; an exception rolls every write of the block back and
        propagates. Nested blocks are savepoints. ``force_rollback=True`` always rolls back
        (the pytest plugin isolates tests with it).
        """
        pinned = self._pinned.get()
        try:
            if pinned is not None:
                with pinned.transaction(force_rollback=force_rollback):
                    yield self
                return
            with self._pool.connection() as conn:
                token = self._pinned.set(conn)
                try:
                    with conn.transaction(force_rollback=force_rollback):
                        yield self
                        # The wake-ups the block's writes kept (ops.WAKES_NOTICE) go in the
                        # transaction: delivered at its commit, as any NOTIFY.
                        if ops.has_wakes(conn) and not force_rollback:
                            ops.send_wakes(conn)
                finally:
                    ops.has_wakes(conn)
                    self._pinned.reset(token)
        except psycopg.Error as exc:
            raise self._on_error(exc, pinned) from exc

    # ---------------------------------------------------------------- schema

    def migrate(
        self, progress: Callable[[str], None] | None = None, *, lock_timeout: float = 60.0
    ) -> list[str]:
        """Apply pending migrations; return the ids applied now (``[]`` when up to date).

        ``progress(migration_id)`` is called before each migration is applied. When another
        process holds the migration lock, waits up to ``lock_timeout`` seconds for it, then
        raises ``MigrationError`` naming that process; with nothing pending no lock is taken.
        """
        check_seconds(lock_timeout, "lock_timeout")
        return _migrate.apply(self._conninfo, progress=progress, lock_timeout=lock_timeout)

    def pending_migrations(self) -> list[str]:
        """Ids of the migrations not applied yet (read-only: takes no lock)."""
        return _migrate.pending(self._conninfo)


class _Steps(ops.Steps):
    """How ``Store`` carries out the steps of one operation run other than its queries."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # the listener's steps; one event for every key this run listens for
        self._listening = Listening(store._listener, threading.Event())

    def step(self, step: Any) -> Any:
        if isinstance(step, ops.Blocking):
            return step.fn(*step.args)
        if isinstance(step, ops.Run):
            return self._store._run(step.op)
        answer = self._listening.answer(step, pinned=self._store._pinned.get() is not None)
        if answer is not NOT_MINE:
            return answer
        if isinstance(step, ops.Sleep):
            seconds = step.seconds if self._store._listener.listening else min(step.seconds, RETRY)
            if self._listening.keys:
                self._listening.event.wait(seconds)
                self._listening.event.clear()
            else:
                threading.Event().wait(seconds)
            return None
        raise TypeError(f"not a step: {step!r}")

    def close(self) -> None:
        self._listening.close()
