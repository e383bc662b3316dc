"""Both faces behind one interface, so the behavioural tests run against each (not a copy of them).

``SyncView`` presents an ``AsyncStore`` with ``Store``'s synchronous API: every coroutine runs
on one private event loop (in a daemon thread), inside one ``contextvars.Context``, so the
connection that ``transaction()`` pins stays pinned across calls exactly as the async face pins
it within a task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import ikigai_store as ik

T = TypeVar("T")


class LoopThread:
    """An asyncio loop running in a daemon thread; ``call`` runs a coroutine there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], context: contextvars.Context | None = None) -> T:
        result: concurrent.futures.Future[T] = concurrent.futures.Future()

        def start() -> None:
            task = self.loop.create_task(coro, context=context)

            def done(t: asyncio.Task[T]) -> None:
                if t.cancelled():
                    result.cancel()
                elif t.exception() is not None:
                    result.set_exception(t.exception())  # type: ignore[arg-type]
                else:
                    result.set_result(t.result())

            task.add_done_callback(done)

        self.loop.call_soon_threadsafe(start)
        return result.result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


class SyncView:
    """An ``AsyncStore`` seen through ``Store``'s sync API (for tests)."""

    def __init__(self, store: ik.AsyncStore, loop: LoopThread) -> None:
        self.async_store = store
        self._loop = loop
        self._context = contextvars.Context()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.call(coro, self._context)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.async_store, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self._call(attr(*args, **kwargs))
        if getattr(attr, "_face", None) is self.async_store:  # a namespace: store.mail, ...
            return _NamespaceView(attr, self._call)
        return attr

    @contextmanager
    def transaction(self, *, force_rollback: bool = False) -> Iterator[SyncView]:
        manager = self.async_store.transaction(force_rollback=force_rollback)
        self._call(manager.__aenter__())
        try:
            yield self
        except BaseException as exc:
            if not self._call(manager.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            self._call(manager.__aexit__(None, None, None))

    @contextmanager
    def _connection(self) -> Iterator[_SyncConnection]:
        """``AsyncStore._connection`` (raw SQL inside the view's transaction), seen as sync."""
        manager = self.async_store._connection()
        conn = self._call(manager.__aenter__())
        try:
            yield _SyncConnection(conn, self._call)
        except BaseException as exc:
            if not self._call(manager.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            self._call(manager.__aexit__(None, None, None))


class _NamespaceView:
    """``store.identities`` / ``store.mail`` of an async store, seen as sync."""

    def __init__(self, namespace: Any, call: Any) -> None:
        self._namespace = namespace
        self._call = call

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._namespace, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self._call(attr(*args, **kwargs))
        return attr


class _SyncConnection:
    """Just enough of a sync psycopg connection over an async one for raw-SQL tests."""

    def __init__(self, conn: Any, call: Any) -> None:
        self._conn = conn
        self._call = call

    def execute(self, query: Any, params: Any = None) -> _SyncCursor:
        return _SyncCursor(self._call(self._conn.execute(query, params)), self._call)


class _SyncCursor:
    def __init__(self, cursor: Any, call: Any) -> None:
        self._cursor = cursor
        self._call = call

    def fetchone(self) -> Any:
        return self._call(self._cursor.fetchone())

    def fetchall(self) -> list[Any]:
        rows: list[Any] = self._call(self._cursor.fetchall())
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())
