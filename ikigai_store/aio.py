"""The asyncio face: ``AsyncStore`` and ``open_async``, the same operations as ``Store``.

Owns the asyncio-facing side of a store: an ``AsyncPool``, transactions, migrations (in a
worker thread) and how the steps of an operation are carried out with asyncio
(``_AsyncSteps``). Every operation is the very generator ``Store`` runs, bound by
``api.Operations`` and driven by ``ops.arun`` on the same SQL, so the two faces cannot drift.
Invariants: as for ``Store``; the connection of ``store.transaction()`` is pinned in a
``ContextVar``, so it belongs to the task that opened the block (and the tasks it creates inside
it); blocking work (starting the embedded server, migrations, the outbox file) runs in a worker
thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Generator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from . import migrate as _migrate
from . import ops
from .api import Operations
from .config import redact, resolve_url
from .embedded import install_exit_hooks
from .errors import ConnectionLost, IkigaiStoreError, NodeUnavailable, translate
from .notify import NOT_MINE, RETRY, AsyncListener, Listening
from .ops import AsyncFace
from .pool import AConn, AsyncPool
from .store import check_pool_options, resolve_target
from .validate import check_seconds

__all__ = ["AsyncStore", "open_async"]

T = TypeVar("T")


class _Opening:
    """What ``open_async`` returns: await it, or use it as ``async with``."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._store: AsyncStore | None = None

    def __await__(self) -> Generator[Any, None, AsyncStore]:
        store: AsyncStore = yield from self._make().__await__()
        return store

    async def __aenter__(self) -> AsyncStore:
        self._store = await self._make()
        return self._store

    async def __aexit__(self, *exc_info: object) -> None:
        if self._store is not None:
            await self._store.close()


def open_async(
    url: str | None = None,
    *,
    migrate: bool = True,
    pool_size: int = 4,
    timeout: float = 10.0,
    migration_lock_timeout: float = 60.0,
) -> _Opening:
    """``ik.open`` for asyncio: ``store = await ik.open_async()`` or
    ``async with ik.open_async() as store:``. Same arguments, same database resolution (the
    embedded server included), same errors."""
    check_pool_options(pool_size, timeout)
    check_seconds(migration_lock_timeout, "migration_lock_timeout")

    async def make() -> AsyncStore:
        if resolve_url(url) is None:
            # The embedded server starts in a worker thread, where signal handlers cannot be
            # installed: install the SIGTERM/SIGHUP release here, on the loop's thread.
            install_exit_hooks()
        resolved, data_dir, revive = await asyncio.to_thread(resolve_target, url)
        store = await AsyncStore.connect(
            resolved, pool_size=pool_size, timeout=timeout, on_unavailable=revive
        )
        store.embedded_data_dir = data_dir
        if migrate:
            try:
                await store.migrate(lock_timeout=migration_lock_timeout)
            except BaseException:
                await store.close()
                raise
        return store

    return _Opening(make)


class AsyncStore(AsyncFace, Operations[AsyncFace]):
    """``Store`` for asyncio: the same methods as coroutines (create with ``open_async`` or
    ``await AsyncStore.connect(url)``); safe to share between tasks. Blocking work runs in a
    worker thread: starting the embedded server, migrations (``progress`` is called there) and
    the outbox's file."""

    def __init__(self, url: str, pool: AsyncPool) -> None:
        Operations.__init__(self, self)
        self._conninfo = url
        self._pool = pool
        self.embedded_data_dir: Path | None = None
        """Data directory of the embedded server this store runs on (None for other servers)."""
        self._pinned: ContextVar[AConn | None] = ContextVar(
            f"ikigai_async_store_{id(self)}", default=None
        )
        self._listener = AsyncListener(pool.probe)

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        pool_size: int = 4,
        timeout: float = 10.0,
        on_unavailable: Callable[[], object] | None = None,
    ) -> AsyncStore:
        """A store on ``url`` (no migrations applied); ``ConnectError`` if it is unreachable.

        Arguments as for ``Store`` (``on_unavailable`` is blocking: it runs in a worker thread).
        """
        check_pool_options(pool_size, timeout)
        conninfo = resolve_url(url) or ""
        pool = await AsyncPool.create(
            conninfo, max_size=pool_size, timeout=timeout, on_unavailable=on_unavailable
        )
        return cls(conninfo, pool)

    @property
    def url(self) -> str:
        """The database URL with its password masked (safe to print; see ``config.redact``)."""
        return redact(self._conninfo)

    def __repr__(self) -> str:
        return f"<AsyncStore {self.url}>"

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection of the store. Idempotent."""
        await self._listener.close()
        await self._pool.close()

    # ---------------------------------------------------------------- running operations

    async def _run(self, op: ops.Op[T]) -> T:
        atomic = ops.is_atomic(op)
        if not atomic and self._pinned.get() is None:
            # The common case, what _scope would do: a plain checkout, minus its generator.
            return await ops.arun(self._pool.connection, op, self._on_error, self._steps)
        return await ops.arun(lambda: self._scope(atomic), op, self._on_error, self._steps)

    def _steps(self) -> ops.AsyncSteps:
        return _AsyncSteps(self)

    @asynccontextmanager
    async def _scope(self, atomic: bool) -> AsyncIterator[AConn]:
        pinned = self._pinned.get()
        if pinned is not None:
            async with pinned.transaction():
                yield pinned
            return
        async with self._pool.connection() as conn:
            if atomic:
                try:
                    async with conn.transaction():
                        yield conn
                except BaseException:
                    ops.has_wakes(conn)  # rolled back: nothing to send
                    raise
                if ops.has_wakes(conn):  # committed: its wake-ups go now (ops.WAKES_NOTICE)
                    await ops.asend_committed_wakes(conn)
            else:
                yield conn

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AConn]:
        """Internal: a connection for raw SQL (see ``Store._connection``)."""
        pinned = self._pinned.get()
        async with self._scope(False) as conn:
            try:
                yield conn
                if pinned is None and ops.has_wakes(conn):  # told by ops.WAKES_NOTICE
                    await ops.asend_wakes(conn)
            except psycopg.Error as exc:
                raise self._on_error(exc, conn) from exc

    def _on_error(self, exc: psycopg.Error, conn: Any) -> IkigaiStoreError:
        error = translate(exc, conn)
        if isinstance(error, ConnectionLost) and not isinstance(error, NodeUnavailable):
            self._pool.mark_suspect()
        return error

    @asynccontextmanager
    async def transaction(self, *, force_rollback: bool = False) -> AsyncIterator[AsyncStore]:
        """Group the store calls made inside the block (in this task, and the tasks it creates
        inside it) into one transaction: ``async with store.transaction():``.

        Leaving the block normally commits; an exception rolls every write of the block back and
        propagates. Nested blocks are savepoints. ``force_rollback=True`` always rolls back
        (the pytest plugin isolates tests with it).
        """
        pinned = self._pinned.get()
        try:
            if pinned is not None:
                async with pinned.transaction(force_rollback=force_rollback):
                    yield self
                return
            async with self._pool.connection() as conn:
                token = self._pinned.set(conn)
                try:
                    async with conn.transaction(force_rollback=force_rollback):
                        yield self
                        # The wake-ups the block's writes kept (ops.WAKES_NOTICE) go in the
                        # transaction: delivered at its commit, as any NOTIFY.
                        if ops.has_wakes(conn) and not force_rollback:
                            await ops.asend_wakes(conn)
                finally:
                    ops.has_wakes(conn)
                    self._pinned.reset(token)
        except psycopg.Error as exc:
            raise self._on_error(exc, pinned) from exc

    # ---------------------------------------------------------------- schema

    async def migrate(
        self, progress: Callable[[str], None] | None = None, *, lock_timeout: float = 60.0
    ) -> list[str]:
        """Apply pending migrations; return the ids applied now (``[]`` when up to date).

        ``progress(migration_id)`` is called before each migration is applied. When another
        process holds the migration lock, waits up to ``lock_timeout`` seconds for it, then
        raises ``MigrationError`` naming that process; with nothing pending no lock is taken.
        """
        # The same docstring as Store.migrate (tests/unit/test_parity.py); the work runs
        # in a worker thread, and so does progress.
        check_seconds(lock_timeout, "lock_timeout")
        return await asyncio.to_thread(
            _migrate.apply, self._conninfo, progress=progress, lock_timeout=lock_timeout
        )

    async def pending_migrations(self) -> list[str]:
        """Ids of the migrations not applied yet (read-only: takes no lock)."""
        return await asyncio.to_thread(_migrate.pending, self._conninfo)


class _AsyncSteps(ops.AsyncSteps):
    """How ``AsyncStore`` carries out the steps of one operation run other than its queries."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store
        # the listener's steps; one event for every key this run listens for
        self._listening = Listening(store._listener, asyncio.Event())

    async def step(self, step: Any) -> Any:
        if isinstance(step, ops.Blocking):
            return await asyncio.to_thread(step.fn, *step.args)
        if isinstance(step, ops.Run):
            return await self._store._run(step.op)
        answer = self._listening.answer(step, pinned=self._store._pinned.get() is not None)
        if answer is not NOT_MINE:
            return answer
        if isinstance(step, ops.Sleep):
            seconds = step.seconds if self._store._listener.listening else min(step.seconds, RETRY)
            if not self._listening.keys:
                await asyncio.sleep(seconds)
                return None
            # Not asyncio.wait_for: on 3.11 it swallows a cancellation that arrives as the
            # event is set (the waiter would return, not withdraw its hand-off).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self._listening.event.wait()
            self._listening.event.clear()
            return None
        raise TypeError(f"not a step: {step!r}")

    def close(self) -> None:
        self._listening.close()
