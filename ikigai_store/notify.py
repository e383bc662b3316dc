"""Waking waiters: one LISTEN connection per store, shared by all its waiters.

Owns ``Listener`` (threads) and ``AsyncListener`` (asyncio). Triggers on ``mail_recipients``
notify channel ``ikigai_mail`` whenever recipient rows become unread (inserted: 0017's statement
trigger; updated: 0023's row trigger), with the recipients' identity ids as payload;
migration 0008's notifies ``ikigai_queue`` when queue messages become available, with their
topic ids (``*``: too many to list, everyone should look). A waiter (``mail.wait``, a blocking
``topics.claim``) registers the (channel, id) it waits for and gets an event that is set when a
notification names it. Invariants:
- a waiter never holds a pooled connection while it sleeps: one extra connection per store
  listens for all of them, opened on the first ``wait`` (so ``pool_size`` waiters cannot starve
  the pool, and an idle store opens no extra connection);
- no wake-up is lost: a waiter registers (and clears its event) before it looks for mail, and
  every (re)connection of the listener wakes every waiter, because notifications sent while
  it was not listening are gone; while the listener cannot connect, waiters look again every
  ``RETRY`` seconds instead of sleeping blind;
- notifications are delivered on commit only, so a waiter wakes for committed mail. The
  store's own writes send theirs right after their commit, in a statement of their own
  (migration 0032, ``ops.WAKES_NOTICE``): a writer that dies in between loses the wake-up, never the
  mail, and every waiter looks again at its deadline and whenever the listener reconnects.

Each listener connection also holds a session-level advisory lock on a random key, its
``liveness`` (None while not connected): ``mail.wait`` registers under it in ``mail_waiters``
(migration 0026), so a registration dies with the connection that holds its key, i.e. with the
waiting process (a send hands mail over only to live registrations; the reaper undoes hand-offs
to dead ones). A key is taken once per connection, before waiters are woken by ``_connected``.

The connection also listens on its own channel, ``ikigai_handoff_<liveness>``: a send that
hands mail to one of its registrations says so there, with the mail itself when it fits in a
payload. Notifications are read a packet at a time: the hand-offs of a packet are settled
before anyone is woken. A waiter that ``expect``-ed the registration gets the mail
(``collect``), and the listener deletes the registration right away (``mail_wait_confirm``,
without a WAL flush), so the woken waiter returns with no round trip of its own. A hand-off
without the mail, or to a registration nobody expects any more, is left to the waiter's own
take (``mail.wait``).

An *observer* (``observe``) is told every notification as it is heard, ``(channel, ids)``
(``ids`` None: everyone of that channel), and ``(None, None)`` whenever the listener has
(re)connected, because what was sent while it was not listening is gone; it is how the MCP
server's resource subscriptions (``mcp.resources``) learn what changed. An observer is called
on the listener's thread (``Listener``) or in its task (``AsyncListener``), outside the lock,
must not block, and must not raise (what it raises is logged and dropped). Observers and
waiters share the one connection and do not see each other.

What both share (the waiters, the key parsing, waking, the reconnection backoff) is written once
in ``_BaseListener``, without I/O; ``Listener`` and ``AsyncListener`` only connect, LISTEN, read
notifications and sleep, on a daemon thread or in a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta, tzinfo
from typing import Any, Generic, TypeAlias, TypeVar

from psycopg import sql

from .ops import Collect, Expect, Listen, Liveness, Op, one
from .sql import queries

__all__ = [
    "ANY",
    "CHANNELS",
    "LEASE",
    "MAIL",
    "NOT_MINE",
    "QUEUE",
    "RETRY",
    "SESSION",
    "TASK",
    "THREAD",
    "AsyncListener",
    "Handoff",
    "Listener",
    "Listening",
    "Observer",
    "listen_sessions",
    "listen_topics",
    "prune_session_listeners",
    "thread_hash",
    "unlisten_sessions",
]

#: The channel migration 0007's trigger notifies (payload: identity ids).
MAIL = "ikigai_mail"
#: The channel migration 0008's trigger notifies (payload: topic ids).
QUEUE = "ikigai_queue"
#: Migration 0017's channels: task list row ids, lease holder ids, thread hashes
#: (``hashtext(thread_id)``), session ids (only of sessions in ``session_listeners``).
TASK = "ikigai_task"
LEASE = "ikigai_lease"
THREAD = "ikigai_thread"
SESSION = "ikigai_session"
#: Every channel a listener listens on.
CHANNELS = (MAIL, QUEUE, TASK, LEASE, THREAD, SESSION)
#: The id of a key that every notification of its channel wakes: ``(TASK, ANY)``.
ANY = -1
_LISTEN = tuple(
    getattr(queries, name).sql for name in ("listen_mail", "listen_queue", "listen_changes")
)
_LIVENESS = queries.listener_liveness.sql
_CONFIRM = queries.mail_wait_confirm.sql
#: The prefix of a listener's own channel (``_listen_handoffs``).
_HANDOFF = "ikigai_handoff_"


def _new_key() -> int:
    """A random positive bigint for the liveness lock (never reused in practice: 63 bits)."""
    return secrets.randbits(63) or 1


Key = tuple[str, int]


def _listen_handoffs(liveness: int) -> sql.Composed:
    """LISTEN on the channel ``send_mail`` tells of its hand-offs to registrations naming
    ``liveness`` (only the listener holding that key listens there). LISTEN takes no
    parameter: the channel is an identifier (as pool.py's CREATE DATABASE)."""
    return sql.SQL("LISTEN {}").format(sql.Identifier(f"{_HANDOFF}{liveness}"))


@dataclass(frozen=True, slots=True)
class Handoff:
    """A mail a send handed to a waiter's registration, as the listener received it: ``item``
    holds InboxItem's columns as JSON values (timestamps as ISO 8601 strings), for the
    recipient ``identity_id``; ``tz`` is the time zone the listener's connection reads
    timestamps in."""

    item: dict[str, Any]
    identity_id: int
    tz: tzinfo | None


def _parse_handoff(payload: str) -> tuple[int, int, dict[str, Any] | None] | None:
    """(registration id, identity id, the mail's columns or None) from a hand-off's payload;
    None when it cannot be read (then the waiter's own take settles it)."""
    try:
        data = json.loads(payload)
        item = data.get("m")
        return int(data["w"]), int(data["i"]), item if isinstance(item, dict) else None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


# Operations of the servers that show sessions and threads (the MCP resources, the web view),
# run by the store's own driver (``AsyncStore._run``): queries/resources.sql.


def thread_hash(thread_id: str) -> Op[int]:
    """The id ``THREAD`` notifications name ``thread_id`` by."""
    row = yield one("resource_thread_hash", thread_id=thread_id)
    return int(row["hash"])


def listen_sessions(session_ids: list[int], listener: uuid.UUID, ttl: timedelta) -> Op[int]:
    """Have appends to ``session_ids`` notify ``SESSION`` for ``ttl`` (``listener``: the
    server's name in ``session_listeners``); renews an existing registration. Returns how many
    sessions (of those that exist) are registered."""
    row = yield one(
        "session_listeners_register", session_ids=session_ids, listener=listener, ttl=ttl
    )
    return int(row["registered"])


def listen_topics(topic_ids: list[int], ttl: timedelta, patience: float = 1.0) -> Op[int]:
    """Have publishes to the queue topics ``topic_ids`` notify ``QUEUE`` for ``ttl``
    (migration 0050: otherwise only while a blocking claim waits on them); a registration is
    only ever extended. Each waits up to ``patience`` seconds for the publishes in flight to
    the topic. Returns how many were registered (the others: retry later)."""
    row = yield one(
        "queue_listen", topic_ids=topic_ids, seconds=ttl.total_seconds(), patience=patience
    )
    return int(row["registered"])


def unlisten_sessions(session_ids: list[int], listener: uuid.UUID) -> Op[int]:
    """Remove ``listener``'s registrations for ``session_ids``; how many went."""
    row = yield one("session_listeners_unregister", session_ids=session_ids, listener=listener)
    return int(row["removed"])


def prune_session_listeners() -> Op[int]:
    """Remove every server's expired registrations; how many went."""
    row = yield one("session_listeners_prune")
    return int(row["removed"])


#: Told ``(channel, ids)`` for each notification heard (``ids`` None: everyone of the channel),
#: ``(None, None)`` after each (re)connection (see ``observe``).
Observer: TypeAlias = Callable[[str | None, set[int] | None], None]
#: Seconds between looks for mail while the listener has no connection.
RETRY = 1.0
#: Seconds before the first reconnection; doubled after each failure up to ``_MAX_DELAY``.
_FIRST_DELAY = 0.1
_MAX_DELAY = 5.0

E = TypeVar("E", threading.Event, asyncio.Event)

log = logging.getLogger("ikigai_store.notify")


def _ids(payload: str) -> set[int] | None:
    """The ids a payload names; None for everyone (``*`` or unreadable)."""
    try:
        return {int(part) for part in payload.split(",")} if payload != "*" else None
    except ValueError:
        return None


def _targets(channel: str, payload: str) -> set[Key] | None:
    """The (channel, id) keys a notification names; None for everyone (``*`` or unreadable).
    A waiter on ``(channel, ANY)`` is woken by every notification of ``channel``."""
    ids = _ids(payload)
    return None if ids is None else {(channel, id_) for id_ in ids}


class _BaseListener(Generic[E]):
    """What both listeners share: the waiters and their events, waking them, the backoff.

    No I/O; the lock only guards the waiters (uncontended on an event loop, never held across
    an ``await``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[Key, set[E]] = {}
        self._observers: dict[object, Observer] = {}
        self._started = False
        self._closed = False
        self._delay = _FIRST_DELAY
        self.listening = False
        #: The advisory lock key this listener's connection holds (None: not connected).
        self.liveness: int | None = None
        self._expected: set[int] = set()  # registrations whose waiters take a hand-off here
        self._handed: dict[int, Handoff] = {}  # given, not yet collected
        self._tz: tzinfo | None = None

    def expect(self, waiter_id: int) -> None:
        """Give the mail handed to registration ``waiter_id`` to its waiter (``collect``) and
        delete the registration; call it before registering."""
        with self._lock:
            self._expected.add(waiter_id)

    def collect(self, waiter_id: int, *, stop: bool = False) -> Handoff | None:
        """The mail given to registration ``waiter_id``'s waiter, if any (then it is the
        waiter's: the listener deletes the registration); with ``stop``, nothing is given to
        it from now on either."""
        with self._lock:
            if stop:
                self._expected.discard(waiter_id)
            return self._handed.pop(waiter_id, None)

    def _give(self, payloads: Sequence[str]) -> list[int]:
        """Settle a packet's hand-offs: the mail of each one expected is given to its waiter,
        who is woken; returns the registrations to delete (theirs now)."""
        given: list[int] = []
        woken: set[Key] = set()
        for payload in payloads:
            parsed = _parse_handoff(payload)
            if parsed is None:
                continue
            waiter_id, identity_id, item = parsed
            with self._lock:
                if item is None or waiter_id not in self._expected:
                    continue  # the waiter's own take settles it
                self._expected.discard(waiter_id)
                self._handed[waiter_id] = Handoff(item, identity_id, self._tz)
            given.append(waiter_id)
            woken.add((MAIL, identity_id))
        if woken:
            self._wake(woken)
        return given

    def _heard_packet(self, notes: Sequence[Any]) -> list[int]:
        """A packet of notifications arrived: hand-offs first (their waiters must find the
        mail when woken), then the rest; returns the registrations to delete."""
        handoffs = [n.payload for n in notes if n.channel.startswith(_HANDOFF)]
        given = self._give(handoffs) if handoffs else []
        for note in notes:
            if not note.channel.startswith(_HANDOFF):
                self._heard(note.channel, note.payload)
        return given

    def _add(self, key: Key, event: E) -> E:
        """Register ``event`` for ``key``; the first registration starts the listener."""
        with self._lock:
            self._waiters.setdefault(key, set()).add(event)
            self._ensure_started()
        return event

    def _ensure_started(self) -> None:
        """Start the listener unless it is started or closed (the lock is held)."""
        if not self._started and not self._closed:
            self._start()
            self._started = True

    def _start(self) -> None:
        raise NotImplementedError

    def observe(self, observer: Observer) -> Callable[[], None]:
        """Tell ``observer`` every notification from now on (see the module docstring), and
        ``(None, None)`` at each (re)connection; starts the listener. Returns the function
        that stops it (idempotent)."""
        token = object()
        with self._lock:
            self._observers[token] = observer
            self._ensure_started()

        def stop() -> None:
            with self._lock:
                self._observers.pop(token, None)

        return stop

    def _tell(self, channel: str | None, ids: set[int] | None) -> None:
        """Call every observer with ``(channel, ids)``, outside the lock."""
        with self._lock:
            observers = list(self._observers.values())
        for observer in observers:
            try:
                observer(channel, ids)
            except Exception:
                log.exception("listener observer failed")

    def _heard(self, channel: str, payload: str) -> None:
        """A notification arrived: wake the waiters it names, then tell the observers."""
        self._wake(_targets(channel, payload))
        if self._observers:
            self._tell(channel, _ids(payload))

    def unregister(self, key: Key, event: E) -> None:
        """Forget an event ``register`` returned (its waiter stopped waiting)."""
        with self._lock:
            events = self._waiters.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._waiters[key]

    def _wake(self, keys: set[Key] | None) -> None:
        """Set the events of ``keys`` (None: of every waiter)."""
        with self._lock:
            if keys is None:
                groups = list(self._waiters.values())
            else:
                keys = keys | {(channel, ANY) for channel, _ in keys}
                groups = [self._waiters[k] for k in keys if k in self._waiters]
            for events in groups:
                for event in events:
                    event.set()

    def _connected(self) -> None:
        """LISTEN is in place: what was sent before it was not heard, so everyone looks."""
        self.listening = True
        self._delay = _FIRST_DELAY
        self._wake(None)
        self._tell(None, None)

    def _backoff(self) -> float:
        """Before a reconnection: everyone looks (nothing is heard meanwhile); the seconds to
        wait, doubled for the next time."""
        self._wake(None)
        delay, self._delay = self._delay, min(self._delay * 2, _MAX_DELAY)
        return delay


#: What ``Listening.answer`` returns for a step that is not the listener's.
NOT_MINE: Any = object()


class Listening(Generic[E]):
    """One operation run's use of its face's listener, the steps both faces answer alike
    without I/O: ``Liveness``, ``Listen`` (every key sets the run's one ``event``), ``Expect``
    and ``Collect``; ``close`` forgets them when the run ends."""

    def __init__(self, listener: _BaseListener[E], event: E) -> None:
        self.listener: _BaseListener[E] = listener
        self.event: E = event
        self.keys: list[Key] = []  # what the run listens for
        self._expected: list[int] = []  # mail_waiters registrations the listener expects

    def answer(self, step: Any, *, pinned: bool) -> Any:
        """The result of ``step`` (``pinned``: the run is inside ``store.transaction()``),
        or ``NOT_MINE``."""
        listener = self.listener
        if isinstance(step, Liveness):
            return None if pinned else listener.liveness
        if isinstance(step, Collect):
            return listener.collect(step.waiter_id, stop=step.stop)
        if isinstance(step, Expect):
            listener.expect(step.waiter_id)
            self._expected.append(step.waiter_id)
            return None
        if isinstance(step, Listen):
            listener._add(step.key, self.event)
            self.keys.append(step.key)
            return None
        return NOT_MINE

    def close(self) -> None:
        for key in self.keys:
            self.listener.unregister(key, self.event)
        for waiter_id in self._expected:  # wait collects or stops its own; this is a backstop
            if self.listener.collect(waiter_id, stop=True) is not None:
                log.error("a mail was handed to a wait that ended without it (it stays read)")


class Listener(_BaseListener[threading.Event]):
    """LISTEN on ``MAIL`` and ``QUEUE`` in a daemon thread; ``register`` returns an event to
    wait on."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        super().__init__()
        self._connect = connect
        self._thread: threading.Thread | None = None

    def register(self, key: Key, event: threading.Event | None = None) -> threading.Event:
        """An event (``event``, else a new one) set when a notification names ``key`` =
        (channel, id) (starts the listener). One event may be registered for several keys."""
        return self._add(key, threading.Event() if event is None else event)

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ikigai_store-listener", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closed:
            try:
                with self._connect() as conn:
                    key = _new_key()
                    while not conn.execute(_LIVENESS, {"key": key}).fetchone()["locked"]:
                        key = _new_key()
                    for statement in (*_LISTEN, _listen_handoffs(key)):
                        conn.execute(statement)
                    self._tz = conn.info.timezone
                    self.liveness = key
                    self._connected()
                    while not self._closed:
                        # One packet per call (stop_after): its hand-offs go first.
                        notes = list(conn.notifies(timeout=0.2, stop_after=1))
                        given = self._heard_packet(notes) if notes else []
                        if given:
                            conn.execute(_CONFIRM, {"waiter_ids": given})
            except Exception as exc:  # the connection failed or was lost: reconnect
                log.info("mail listener reconnecting: %s", exc)
            finally:
                self.listening = False
                self.liveness = None
            if not self._closed:
                threading.Event().wait(self._backoff())

    def close(self) -> None:
        """Stop listening (the thread ends within a fraction of a second). Idempotent."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._wake(None)


class AsyncListener(_BaseListener[asyncio.Event]):
    """``Listener`` for asyncio: LISTEN in a task of the loop that first waits."""

    def __init__(self, connect: Callable[[], Awaitable[Any]]) -> None:
        super().__init__()
        self._connect = connect
        self._task: asyncio.Task[None] | None = None
        self._confirming: asyncio.Future[Any] | None = None

    def register(self, key: Key, event: asyncio.Event | None = None) -> asyncio.Event:
        """An event (``event``, else a new one) set when a notification names ``key`` =
        (channel, id) (starts the listener). One event may be registered for several keys."""
        return self._add(key, asyncio.Event() if event is None else event)

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while not self._closed:
            try:
                async with await self._connect() as conn:
                    key = _new_key()
                    while not (await (await conn.execute(_LIVENESS, {"key": key})).fetchone())[
                        "locked"
                    ]:
                        key = _new_key()
                    for statement in (*_LISTEN, _listen_handoffs(key)):
                        await conn.execute(statement)
                    self._tz = conn.info.timezone
                    self.liveness = key
                    self._connected()
                    while True:
                        # One packet per call (stop_after): its hand-offs go first.
                        notes = [n async for n in conn.notifies(stop_after=1)]
                        given = self._heard_packet(notes)
                        if given:
                            # close() lets this finish: the waiters may have returned the
                            # mail already, and an undeleted registration would be undone.
                            self._confirming = asyncio.ensure_future(
                                conn.execute(_CONFIRM, {"waiter_ids": given})
                            )
                            try:
                                await self._confirming
                            finally:
                                self._confirming = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("mail listener reconnecting: %s", exc)
            finally:
                self.listening = False
                self.liveness = None
            if not self._closed:
                await asyncio.sleep(self._backoff())

    async def close(self) -> None:
        """Stop listening. Idempotent."""
        self._closed = True
        task, self._task = self._task, None
        if self._confirming is not None:  # hand-offs given: delete their registrations first
            with contextlib.suppress(Exception):
                await self._confirming
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._wake(None)
