"""Live pages: the database's notifications pushed to browsers as Server-Sent Events.

Owns ``Hub``, one per server. It observes the store's one LISTEN connection
(``notify._BaseListener.observe``), so the server uses the pool plus that one connection
however many pages are open, and fans every notification out to the open ``/live`` streams as
an SSE ``change`` event: ``{"c": channel, "ids": [...] | null}`` (``ids`` null: anything of that
channel). Pages refresh the regions a change names (``static/app.js``). Invariants:
- no update is lost across a reconnection: every event has an id ``<epoch>-<n>`` (``epoch``
  names this server process); a browser that reconnects with ``Last-Event-ID`` first gets the
  events it missed, from a buffer of the newest ``BUFFER``, or, when they are gone (too old,
  another server process, an overflowing stream), a ``reset`` event: refresh everything. The
  store's listener reconnecting (notifications sent meanwhile are lost) sends ``reset`` to all;
- a slow browser never slows the others: each stream has a bounded queue, and a stream whose
  queue is full is sent ``reset`` instead of what overflowed;
- appends notify ``ikigai_session`` only for sessions in ``session_listeners``: the hub keeps a
  row for every session a page showed in the last ``WATCH_FOR`` seconds (``watch_session``),
  renewed every ``REFRESH`` seconds, and removes them when the server stops;
- queue publishes notify ``ikigai_queue`` only for topics someone listens to (migration 0050):
  the hub registers every queue topic a page showed in the last ``WATCH_FOR`` seconds
  (``watch_topics``), for three ``REFRESH`` periods, renewed every ``REFRESH`` seconds (the
  registrations run out by themselves).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

from .. import notify
from ..aio import AsyncStore
from ..errors import IkigaiStoreError

__all__ = ["BUFFER", "Hub"]

log = logging.getLogger("ikigai_store.web")

#: Events kept for browsers that reconnect.
BUFFER = 4096
#: Events one stream may have waiting before it is sent ``reset`` instead.
QUEUE = 1024
#: Seconds between keep-alive comments on an idle stream.
KEEPALIVE = 15.0
#: A session stays listened for this long after a page last asked for it.
WATCH_FOR = 600.0
#: Seconds between renewals of the session_listeners rows (each expires after three of them).
REFRESH = 30.0
_SHORT = {
    notify.MAIL: "mail",
    notify.QUEUE: "queue",
    notify.TASK: "task",
    notify.LEASE: "lease",
    notify.THREAD: "thread",
    notify.SESSION: "session",
}


class _Stream:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[int, str] | None] = asyncio.Queue(QUEUE)
        self.overflowed = False


class Hub:
    """The server's notifications, fanned out to every open ``/live`` stream."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store
        self.epoch = secrets.token_hex(4)
        self._n = 0
        self._recent: deque[tuple[int, str]] = deque(maxlen=BUFFER)
        self._streams: set[_Stream] = set()
        self._stop_observing: Callable[[], None] | None = None
        self._sessions: dict[int, float] = {}
        self._topics: dict[int, float] = {}
        self._listener = uuid.uuid4()
        self._refresher: asyncio.Task[None] | None = None
        self.closed = False

    # -- the store's notifications

    def start(self) -> None:
        """Observe the store's listener (opening its connection) and renew session rows."""
        self._stop_observing = self._store._listener.observe(self._heard)
        self._refresher = asyncio.get_running_loop().create_task(self._refresh())

    def _heard(self, channel: str | None, ids: set[int] | None) -> None:
        if channel is None:
            self.publish("reset", "{}")
            return
        name = _SHORT.get(channel)
        if name is not None:
            self.publish("change", json.dumps({"c": name, "ids": sorted(ids) if ids else None}))

    def publish(self, event: str, data: str) -> None:
        """Send ``event`` with ``data`` to every stream (and keep it for reconnections)."""
        self._n += 1
        item = (self._n, f"id: {self.epoch}-{self._n}\nevent: {event}\ndata: {data}\n\n")
        self._recent.append(item)
        for stream in self._streams:
            if stream.overflowed:
                continue
            try:
                stream.queue.put_nowait(item)
            except asyncio.QueueFull:
                stream.overflowed = True

    # -- the streams

    def _missed(self, last_event_id: str | None) -> list[tuple[int, str]] | None:
        """What a browser that saw ``last_event_id`` missed; None: unknown (send reset)."""
        if not last_event_id:
            return []
        epoch, _, n = last_event_id.partition("-")
        if epoch != self.epoch or not n.isdigit():
            return None
        seen = int(n)
        if seen > self._n:
            return None
        if seen == self._n:
            return []
        if not self._recent or self._recent[0][0] > seen + 1:
            return None
        return [item for item in self._recent if item[0] > seen]

    async def stream(self, last_event_id: str | None) -> AsyncIterator[str]:
        """The text of one ``/live`` stream: what was missed, then every event as it comes,
        with keep-alive comments; ends when the hub closes."""
        stream = _Stream()
        self._streams.add(stream)
        try:
            yield "retry: 1000\n\n"
            missed = self._missed(last_event_id)
            if missed is None:
                yield self._reset_text()
            else:
                for _, text in missed:
                    yield text
            while not self.closed:
                if stream.overflowed:
                    stream.overflowed = False
                    while not stream.queue.empty():
                        stream.queue.get_nowait()
                    yield self._reset_text()
                try:  # not asyncio.wait_for: on 3.11 it can swallow a cancellation
                    async with asyncio.timeout(KEEPALIVE):
                        item = await stream.queue.get()
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if item is None:
                    return
                yield item[1]
        finally:
            self._streams.discard(stream)

    def _reset_text(self) -> str:
        return f"id: {self.epoch}-{self._n}\nevent: reset\ndata: {{}}\n\n"

    @property
    def streams(self) -> int:
        """How many ``/live`` streams are open."""
        return len(self._streams)

    # -- sessions

    async def watch_session(self, session_id: int) -> None:
        """A page shows ``session_id``: have its appends notify (for ``WATCH_FOR`` seconds)."""
        first = session_id not in self._sessions
        self._sessions[session_id] = time.monotonic()
        if first:
            await self._store._run(notify.listen_sessions([session_id], self._listener, _ttl()))

    # -- queue topics

    async def watch_topics(self, topic_ids: list[int]) -> None:
        """A page shows the queue topics ``topic_ids``: have their publishes notify (for
        ``WATCH_FOR`` seconds)."""
        now = time.monotonic()
        new = [t for t in topic_ids if t not in self._topics]
        self._topics.update(dict.fromkeys(topic_ids, now))
        if new:
            await self._store._run(notify.listen_topics(new, _ttl()))

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(REFRESH)
            now = time.monotonic()
            gone = [s for s, at in self._sessions.items() if now - at > WATCH_FOR]
            for session_id in gone:
                del self._sessions[session_id]
            for topic_id in [t for t, at in self._topics.items() if now - at > WATCH_FOR]:
                del self._topics[topic_id]
            try:
                if self._topics:
                    await self._store._run(notify.listen_topics(sorted(self._topics), _ttl()))
                if gone:
                    await self._store._run(notify.unlisten_sessions(gone, self._listener))
                if self._sessions:
                    await self._store._run(
                        notify.listen_sessions(sorted(self._sessions), self._listener, _ttl())
                    )
                await self._store._run(notify.prune_session_listeners())
            except IkigaiStoreError as exc:  # tried again at the next refresh
                log.info("could not refresh session listeners: %s", exc)

    async def close(self) -> None:
        """End every stream, stop observing, unregister the sessions. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for stream in list(self._streams):
            with contextlib.suppress(asyncio.QueueFull):
                stream.queue.put_nowait(None)
            stream.overflowed = False
        if self._stop_observing is not None:
            self._stop_observing()
        refresher, self._refresher = self._refresher, None
        if refresher is not None:
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
        sessions, self._sessions = sorted(self._sessions), {}
        if sessions:
            try:
                await self._store._run(notify.unlisten_sessions(sessions, self._listener))
            except IkigaiStoreError as exc:
                log.info("could not unregister session listeners: %s", exc)


def _ttl() -> timedelta:
    return timedelta(seconds=REFRESH * 3)
