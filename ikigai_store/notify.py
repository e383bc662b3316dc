"""Waking waiters: one LISTEN connection per store, shared by all its waiters.

Owns ``Listener`` (threads) and ``AsyncListener`` (asyncio). Migration 0007's trigger notifies
channel ``ikigai_mail`` whenever recipient rows become unread, with the recipients' identity
ids as payload; migration 0008's notifies ``ikigai_queue`` when queue messages become
available, with their topic ids (``*``: too many to list, everyone should look). A waiter
(``mail.wait``, a blocking ``topics.claim``) registers the (channel, id) it waits for and gets
an event that is set when a notification names it. Invariants:
- a waiter never holds a pooled connection while it sleeps: one extra connection per store
  listens for all of them, opened on the first ``wait`` (so ``pool_size`` waiters cannot starve
  the pool, and an idle store opens no extra connection);
- no wake-up is lost: a waiter registers (and clears its event) before it looks for mail, and
  every (re)connection of the listener wakes every waiter, because notifications sent while
  it was not listening are gone; while the listener cannot connect, waiters look again every
  ``RETRY`` seconds instead of sleeping blind;
- notifications are delivered on commit only, so a waiter wakes for committed mail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from .sql import queries

__all__ = ["MAIL", "QUEUE", "RETRY", "AsyncListener", "Listener"]

#: The channel migration 0007's trigger notifies (payload: identity ids).
MAIL = "ikigai_mail"
#: The channel migration 0008's trigger notifies (payload: topic ids).
QUEUE = "ikigai_queue"
_LISTEN = ("listen_mail", "listen_queue")

Key = tuple[str, int]
#: Seconds between looks for mail while the listener has no connection.
RETRY = 1.0

log = logging.getLogger("ikigai_store.notify")


def _targets(channel: str, payload: str) -> set[Key] | None:
    """The (channel, id) keys a notification names; None for everyone (``*`` or unreadable)."""
    try:
        return {(channel, int(part)) for part in payload.split(",")} if payload != "*" else None
    except ValueError:
        return None


class Listener:
    """LISTEN on ``CHANNEL`` in a daemon thread; ``register`` returns an event to wait on."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._lock = threading.Lock()
        self._waiters: dict[Key, set[threading.Event]] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        self.listening = False

    def register(self, key: Key) -> threading.Event:
        """An event set when a notification names ``key`` = (channel, id) (starts the
        listener)."""
        event = threading.Event()
        with self._lock:
            self._waiters.setdefault(key, set()).add(event)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="ikigai_store-listener", daemon=True
                )
                self._thread.start()
        return event

    def unregister(self, key: Key, event: threading.Event) -> None:
        with self._lock:
            events = self._waiters.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._waiters[key]

    def _wake(self, keys: set[Key] | None) -> None:
        with self._lock:
            if keys is None:
                groups = list(self._waiters.values())
            else:
                groups = [self._waiters[k] for k in keys if k in self._waiters]
            for events in groups:
                for event in events:
                    event.set()

    def _run(self) -> None:
        delay = 0.1
        while not self._closed:
            try:
                with self._connect() as conn:
                    for name in _LISTEN:
                        conn.execute(getattr(queries, name).sql)
                    self.listening = True
                    delay = 0.1
                    self._wake(None)  # whatever was sent before this LISTEN was not heard
                    while not self._closed:
                        for note in conn.notifies(timeout=0.2):
                            self._wake(_targets(note.channel, note.payload))
            except Exception as exc:  # the connection failed or was lost: reconnect
                log.info("mail listener reconnecting: %s", exc)
            finally:
                self.listening = False
            if not self._closed:
                self._wake(None)
                threading.Event().wait(delay)
                delay = min(delay * 2, 5.0)

    def close(self) -> None:
        """Stop listening (the thread ends within a fraction of a second). Idempotent."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._wake(None)


class AsyncListener:
    """``Listener`` for asyncio: LISTEN in a task of the loop that first waits."""

    def __init__(self, connect: Callable[[], Awaitable[Any]]) -> None:
        self._connect = connect
        self._waiters: dict[Key, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.listening = False

    def register(self, key: Key) -> asyncio.Event:
        """An event set when a notification names ``key`` = (channel, id) (starts the
        listener)."""
        event = asyncio.Event()
        self._waiters.setdefault(key, set()).add(event)
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run())
        return event

    def unregister(self, key: Key, event: asyncio.Event) -> None:
        events = self._waiters.get(key)
        if events is not None:
            events.discard(event)
            if not events:
                del self._waiters[key]

    def _wake(self, keys: set[Key] | None) -> None:
        if keys is None:
            groups = list(self._waiters.values())
        else:
            groups = [self._waiters[k] for k in keys if k in self._waiters]
        for events in groups:
            for event in events:
                event.set()

    async def _run(self) -> None:
        delay = 0.1
        while not self._closed:
            try:
                conn = await self._connect()
                async with conn:
                    for name in _LISTEN:
                        await conn.execute(getattr(queries, name).sql)
                    self.listening = True
                    delay = 0.1
                    self._wake(None)
                    async for note in conn.notifies():
                        self._wake(_targets(note.channel, note.payload))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("mail listener reconnecting: %s", exc)
            finally:
                self.listening = False
            if not self._closed:
                self._wake(None)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def close(self) -> None:
        """Stop listening. Idempotent."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._wake(None)
