"""MCP resources: the store's state as JSON documents at ``ikigai://`` URIs, and subscriptions
to them, woken by PostgreSQL's LISTEN/NOTIFY.

Owns the URIs (``parse``, ``uri``, ``TEMPLATES``), ``Resources`` (``resources/list``,
``resources/templates/list``, ``resources/read``, ``resources/subscribe`` /
``resources/unsubscribe`` and ``subscriptions/listen`` for one ``server.Face``) and
``PgSubscriptionBus`` (the SDK's ``SubscriptionBus``, fed by the database's notifications).

The URIs, each path part percent-encoded (UTF-8), what a read returns (``application/json``)
and the notification (migrations 0007 and 0017) that says it changed::

    ikigai://inbox/{identity}              mail.counts + mail.inbox      ikigai_mail (recipient)
    ikigai://thread/{thread_id}            mail.thread                   ikigai_thread (hashtext)
    ikigai://session/{session_id}/context  replay_session                ikigai_session
    ikigai://agent/{agent_uuid}/context    replay_agent                  ikigai_session (its own)
    ikigai://tasks/{list_id}               tasks.get_list + tasks.list   ikigai_task (list row id)
    ikigai://leases/{identity}             leases.held(holder=)          ikigai_lease (holder)

Invariants:
- a read runs existing operations only and writes nothing (but the server's own identity,
  resolved on first use as for any tool); every failure (a bad or unknown URI, a refused
  read, the database gone) is an MCP error whose message is one line, the library error's
  class and message, never a traceback;
- who may read is what the tools allow: an inbox only to its own identity, a thread only the
  mail the server's identity sent or received (an ``operator`` server: any identity's, the
  whole thread); the rest to anyone. Subscribing needs what reading needs;
- a subscriber hears ``notifications/resources/updated`` for the URI (the very string it
  subscribed with) after each commit whose notification names the URI's channel and id: the
  server observes the store's one listening connection (``notify.AsyncListener.observe``),
  so a change made by any process, through any server, reaches every server;
- nothing is lost when that connection drops: at each (re)connection every watched URI is
  reported updated. Spurious updates are allowed (a ``hashtext`` collision, ``*`` payloads,
  a mail state change that does not show in the first page), missed ones are not, except for
  what no notification announces: leases that merely expire, mail read or acked by its own
  identity (``ikigai_mail`` names recipients whose mail becomes unread);
- appends notify ``ikigai_session`` only for sessions in ``session_listeners``: while a
  session's or one of its agents' context is watched, this process (``listener``, a UUID)
  keeps the session's row there, expiring at most ``SESSION_TTL`` ahead and pushed forward
  every ``SESSION_REFRESH``; the row is deleted when the last watch of the session ends and
  at ``close``; the row is committed before a subscription is acknowledged;
- a ``resources/subscribe`` subscription belongs to its MCP connection and ends with it (or
  ``resources/unsubscribe``); a ``subscriptions/listen`` stream (protocol 2026-07-28) watches
  its URIs while it is open. A connection or stream watches at most ``MAX_WATCHES`` URIs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server.subscriptions import ListenHandler, ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError
from pydantic_core import to_jsonable_python

from .. import notify
from ..aio import AsyncStore
from ..errors import DatabaseUnavailable, IkigaiStoreError, InvalidArgument, StoreClosed
from ..models import Identity

if TYPE_CHECKING:
    from .server import Face

__all__ = [
    "MAX_WATCHES",
    "SCHEME",
    "SESSION_REFRESH",
    "SESSION_TTL",
    "TEMPLATES",
    "PgSubscriptionBus",
    "Ref",
    "Resources",
    "parse",
    "uri",
]

log = logging.getLogger("ikigai_store.mcp")

SCHEME = "ikigai://"
MIME = "application/json"
#: A URI longer than this is refused (no valid one comes close).
MAX_URI_CHARS = 4096
#: URIs one MCP connection (or one listen stream) may watch at once.
MAX_WATCHES = 256
#: How far ahead a session_listeners row expires, and how often it is pushed forward.
SESSION_TTL = timedelta(minutes=2)
SESSION_REFRESH = 40.0
#: Task lists named by ``resources/list`` (the oldest first; the rest are reachable by URI).
LISTED_TASK_LISTS = 100
#: Seconds a first subscription waits for LISTEN to be in place (after which it goes on:
#: the connection, when it comes, reports every watched URI updated).
LISTEN_WAIT = 5.0
#: A message of an MCP error is cut to this many characters (a hostile URI is echoed).
MAX_ERROR_CHARS = 1000

Key = tuple[str, int]


# ---------------------------------------------------------------- URIs


@dataclass(frozen=True, slots=True)
class Ref:
    """What a URI names: ``kind`` (``inbox``, ``thread``, ``session``, ``agent``, ``tasks``,
    ``leases``) and ``key``, its decoded path part (a session id as its digits)."""

    kind: str
    key: str


#: Each kind's URI template, title and description (``resources/templates/list``).
TEMPLATES: tuple[tuple[str, str, str, str], ...] = (
    ("inbox", "ikigai://inbox/{identity}", "Inbox",
     "An identity's mailbox counts and newest 50 unread, read and starred mails (your own "
     "identity's only). Updated when mail arrives."),
    ("thread", "ikigai://thread/{thread_id}", "Mail thread",
     "The mails of a thread you sent or received, in order. Updated when a mail joins it."),
    ("session", "ikigai://session/{session_id}/context", "Session context",
     "A session's replayed context (messages, marks, skipped rewinds). Updated on appends."),
    ("agent", "ikigai://agent/{agent_uuid}/context", "Agent context",
     "An agent's replayed context (inherited history, then its own). Updated on appends to "
     "its session."),
    ("tasks", "ikigai://tasks/{list_id}", "Task list",
     "A task list and its tasks in creation order. Updated when a task changes."),
    ("leases", "ikigai://leases/{identity}", "Reservations",
     "The live leases (file and resource reservations) an identity holds. Updated when one "
     "is granted, renewed or released."),
)  # fmt: skip

_SHAPES = {"inbox": 1, "thread": 1, "tasks": 1, "leases": 1, "session": 2, "agent": 2}


def uri(kind: str, key: str | int) -> str:
    """The URI of ``kind`` (see ``TEMPLATES``) for ``key``, percent-encoded."""
    if kind not in _SHAPES:
        raise InvalidArgument(f"unknown resource kind {kind!r}")
    part = quote(str(key), safe="")
    return f"{SCHEME}{kind}/{part}/context" if _SHAPES[kind] == 2 else f"{SCHEME}{kind}/{part}"


def parse(text: str) -> Ref:
    """What the URI ``text`` names; ``InvalidArgument`` saying why it names nothing."""
    if not isinstance(text, str) or not text.startswith(SCHEME):
        raise InvalidArgument(f"not an {SCHEME} URI: {text!r}; see resources/templates/list")
    if len(text) > MAX_URI_CHARS:
        raise InvalidArgument(f"URI is {len(text)} characters; at most {MAX_URI_CHARS}")
    kind, _, rest = text[len(SCHEME) :].partition("/")
    parts = rest.split("/")
    shape = _SHAPES.get(kind)
    if shape is None:
        known = ", ".join(template for _, template, _, _ in TEMPLATES)
        raise InvalidArgument(f"unknown resource {text!r}; the resources are {known}")
    if (
        len(parts) != shape
        or (shape == 2 and parts[1] != "context")
        or not parts[0]
        or re.search(r"[?#\s]", text)
    ):
        template = next(t for k, t, _, _ in TEMPLATES if k == kind)
        raise InvalidArgument(f"malformed URI {text!r}: expected {template}")
    try:
        key = unquote(parts[0], errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgument(f"URI {text!r} percent-encodes invalid UTF-8") from None
    if kind == "session" and not key.isdecimal():
        raise InvalidArgument(f"session id must be a positive integer, got {key!r}")
    return Ref(kind, key)


# ---------------------------------------------------------------- the bus


@dataclass(slots=True)
class _Watch:
    key: Key
    count: int


Unwatch = Callable[[], Awaitable[None]]


class PgSubscriptionBus:
    """A ``SubscriptionBus`` whose events are the database's notifications.

    ``watch(uri, ref)`` maps a URI to the (channel, id) its changes are notified with
    (resolved once, from the store) and counts its watchers; every notification the store's
    listener hears then becomes a ``ResourceUpdated`` for each watched URI it names, handed
    to every ``subscribe``d listener (the SDK's ``ListenHandler``, ``Resources``' classic
    subscriptions). Changes reach every process through PostgreSQL, so ``publish`` only
    fans out to this process's listeners (for events that are not the database's)."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store
        #: This process's name in ``session_listeners``.
        self.listener = uuid.uuid4()
        self._listeners: dict[object, Callable[[ServerEvent], None]] = {}
        self._watched: dict[str, _Watch] = {}
        self._by_key: dict[Key, set[str]] = {}
        self._sessions: dict[int, int] = {}
        self._lock = asyncio.Lock()
        self._stop_observing: Callable[[], None] | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._closed = False

    # -- SubscriptionBus

    async def publish(self, event: ServerEvent) -> None:
        """Deliver ``event`` to this process's listeners."""
        self._fan_out([event])
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """Register ``listener`` (synchronous, called on the event loop); returns the
        idempotent function that unregisters it."""
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def _fan_out(self, events: Iterable[ServerEvent]) -> None:
        listeners = list(self._listeners.values())
        for event in events:
            for listener in listeners:
                try:
                    listener(event)
                except Exception:  # one bad listener must not starve the others
                    log.exception("subscription listener failed")

    # -- what is watched

    async def watch(self, text: str, ref: Ref) -> Unwatch:
        """Report ``text`` (the URI of ``ref``) updated from now on, until the returned
        function is awaited (idempotent). ``NotFound`` for what does not exist; when it
        returns, LISTEN is in place (or ``LISTEN_WAIT`` passed) and a watched session is
        registered in ``session_listeners``."""
        if self._closed:
            raise StoreClosed("the MCP server is shutting down")
        key = await self._key(ref)
        async with self._lock:
            if key[0] == notify.SESSION and self._sessions.get(key[1], 0) == 0:
                await self._store._run(notify.listen_sessions([key[1]], self.listener, SESSION_TTL))
                self._start_refresher()
            if key[0] == notify.SESSION:
                self._sessions[key[1]] = self._sessions.get(key[1], 0) + 1
            watch = self._watched.get(text)
            if watch is None or watch.key != key:
                if watch is not None:  # the name now means another row (re-created)
                    self._by_key.get(watch.key, set()).discard(text)
                watch = self._watched[text] = _Watch(key, 0)
            watch.count += 1
            self._by_key.setdefault(key, set()).add(text)
            if self._stop_observing is None:
                self._stop_observing = self._store._listener.observe(self._heard)
        await self._until_listening()
        done = False

        async def unwatch() -> None:
            nonlocal done
            if done:
                return
            done = True
            await self._unwatch(text, key)

        return unwatch

    async def _unwatch(self, text: str, key: Key) -> None:
        async with self._lock:
            watch = self._watched.get(text)
            if watch is not None and watch.key == key:
                watch.count -= 1
                if watch.count <= 0:
                    del self._watched[text]
                    uris = self._by_key.get(key, set())
                    uris.discard(text)
                    if not uris:
                        self._by_key.pop(key, None)
            if key[0] != notify.SESSION:
                return
            left = self._sessions.get(key[1], 0) - 1
            if left > 0:
                self._sessions[key[1]] = left
                return
            self._sessions.pop(key[1], None)
            try:
                await self._store._run(notify.unlisten_sessions([key[1]], self.listener))
            except IkigaiStoreError as exc:  # the row expires by itself
                log.info("could not unregister session %s: %s", key[1], exc)

    async def _key(self, ref: Ref) -> Key:
        """The (channel, id) the changes of ``ref`` are notified with; ``NotFound``."""
        store = self._store
        if ref.kind == "inbox":
            return notify.MAIL, (await store.identities.get(ref.key)).id
        if ref.kind == "leases":
            return notify.LEASE, (await store.identities.get(ref.key)).id
        if ref.kind == "tasks":
            return notify.TASK, (await store.tasks.get_list(ref.key)).id
        if ref.kind == "thread":
            return notify.THREAD, await store._run(notify.thread_hash(ref.key))
        if ref.kind == "session":
            return notify.SESSION, (await store.get_session(int(ref.key))).id
        return notify.SESSION, (await store.get_agent(ref.key)).session_id

    async def _until_listening(self) -> None:
        listener = self._store._listener
        with anyio.move_on_after(LISTEN_WAIT):
            while not listener.listening:
                await anyio.sleep(0.005)

    def _heard(self, channel: str | None, ids: set[int] | None) -> None:
        """The listener's observer: report the watched URIs a notification names (every
        one after a (re)connection)."""
        if channel is None:
            uris: set[str] = set(self._watched)
        elif ids is None:
            uris = {text for text, watch in self._watched.items() if watch.key[0] == channel}
        else:
            uris = set()
            for id_ in ids:
                uris.update(self._by_key.get((channel, id_), ()))
        if uris:
            self._fan_out(ResourceUpdated(uri=text) for text in sorted(uris))

    # -- session_listeners

    def _start_refresher(self) -> None:
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self._refresh())

    async def _refresh(self) -> None:
        """Push this process's session_listeners rows forward, and drop expired ones."""
        while True:
            await asyncio.sleep(SESSION_REFRESH)
            sessions = sorted(self._sessions)
            if not sessions:
                continue
            try:
                await self._store._run(notify.listen_sessions(sessions, self.listener, SESSION_TTL))
                await self._store._run(notify.prune_session_listeners())
            except IkigaiStoreError as exc:  # tried again at the next refresh
                log.info("could not refresh session listeners: %s", exc)

    async def close(self) -> None:
        """Stop observing and unregister every session of this process. Idempotent."""
        self._closed = True
        if self._stop_observing is not None:
            self._stop_observing()
            self._stop_observing = None
        refresher, self._refresher = self._refresher, None
        if refresher is not None:
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
        sessions, self._sessions = sorted(self._sessions), {}
        self._watched.clear()
        self._by_key.clear()
        if sessions:
            try:
                await self._store._run(notify.unlisten_sessions(sessions, self.listener))
            except IkigaiStoreError as exc:
                log.info("could not unregister session listeners: %s", exc)


# ---------------------------------------------------------------- the MCP handlers


def mcp_error(exc: Exception) -> MCPError:
    """An MCP error for a failure: the library error's class and message on one line
    (invalid params for what the caller can fix, internal for the rest)."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, IkigaiStoreError):
        message = f"{type(exc).__name__}: {exc}"
        code = (
            types.INTERNAL_ERROR if isinstance(exc, DatabaseUnavailable) else types.INVALID_PARAMS
        )
    else:
        message = f"internal error ({type(exc).__name__}); see the server's log"
        code = types.INTERNAL_ERROR
    line = " ".join(message.split())
    if len(line) > MAX_ERROR_CHARS:
        line = line[: MAX_ERROR_CHARS - 1] + "…"
    return MCPError(code, line)


@contextlib.contextmanager
def _as_mcp_errors(what: str) -> Iterator[None]:
    """Turn a failure inside the block into ``mcp_error``'s (logging what is a bug of ours)."""
    try:
        yield
    except MCPError:
        raise
    except IkigaiStoreError as exc:
        raise mcp_error(exc) from None
    except Exception as exc:  # a bug of ours: the caller gets one line, the log the rest
        log.exception("%s failed", what)
        raise mcp_error(exc) from None


def _json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value), ensure_ascii=False, separators=(",", ":"))


#: Where a connection keeps its ``resources/subscribe`` subscriptions (``Connection.state``).
_STATE = "ikigai_store.resources"


class Resources:
    """The resource handlers of one ``Face`` (see the module's invariants)."""

    def __init__(self, face: Face) -> None:
        self.face = face
        self.bus = PgSubscriptionBus(face.store)
        self.listen_handler = ListenHandler(self.bus)
        self._by_uri: dict[str, dict[int, Any]] = {}
        self._sending: set[asyncio.Task[None]] = set()
        self.bus.subscribe(self._deliver)

    # -- reading

    async def _caller(self) -> Identity:
        return await self.face.identity()

    async def _allowed(self, ref: Ref) -> None:
        """``InvalidArgument`` unless the server's identity may read ``ref``."""
        if ref.kind != "inbox" or self.face.operator:
            return
        me = (await self._caller()).name
        if ref.key != me:
            raise InvalidArgument(
                f"this server acts as {me!r}: it reads {uri('inbox', me)} only (an "
                "--operator server reads any inbox)"
            )

    async def document(self, ref: Ref) -> dict[str, Any]:
        """The JSON document ``ref`` names, as read now."""
        store = self.face.store
        key = ref.key
        if ref.kind == "inbox":
            counts = await store.mail.counts(key)
            return {"identity": key, "counts": counts, "items": await store.mail.inbox(key)}
        if ref.kind == "thread":
            me = None if self.face.operator else (await self._caller()).name
            return {"thread_id": key, "mail": await store.mail.thread(key, identity=me)}
        if ref.kind == "tasks":
            task_list = await store.tasks.get_list(key)
            return {"list": task_list, "tasks": await store.tasks.list(key)}
        if ref.kind == "leases":
            return {"holder": key, "leases": await store.leases.held(holder=key)}
        if ref.kind == "session":
            context = await store.replay_session(int(key))
            return {"session_id": int(key), **to_jsonable_python(context)}
        context = await store.replay_agent(key)
        return {"agent_uuid": key, **to_jsonable_python(context)}

    async def read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """``resources/read``: the document, as one ``application/json`` text."""
        with _as_mcp_errors("resources/read"):
            ref = parse(params.uri)
            await self._allowed(ref)
            text = _json(await self.document(ref))
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, mime_type=MIME, text=text)]
        )

    async def list_resources(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """``resources/list``: the server identity's inbox and leases, and the task lists of
        the server's project and of no project (``tasks.lists``' ``project_key``)."""
        with _as_mcp_errors("resources/list"):
            me = (await self._caller()).name
            listed = [
                types.Resource(
                    name=f"inbox:{me}", title=f"Inbox of {me}", uri=uri("inbox", me),
                    description="Your mailbox counts and newest mails.", mime_type=MIME,
                ),
                types.Resource(
                    name=f"leases:{me}", title=f"Reservations of {me}", uri=uri("leases", me),
                    description="The leases (file reservations) you hold.", mime_type=MIME,
                ),
            ]  # fmt: skip
            lists = await self.face.store.tasks.lists(project_key=self.face.project)
            for task_list in lists[:LISTED_TASK_LISTS]:
                listed.append(
                    types.Resource(
                        name=f"tasks:{task_list.list_id}",
                        title=f"Task list {task_list.list_id}",
                        uri=uri("tasks", task_list.list_id),
                        description=f"The tasks of list {task_list.list_id} "
                        f"(owner {task_list.owner}).",
                        mime_type=MIME,
                    )
                )
        return types.ListResourcesResult(resources=listed)

    async def list_templates(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        """``resources/templates/list``: one template per kind of resource."""
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name=kind,
                    title=title,
                    uri_template=template,
                    description=text,
                    mime_type=MIME,
                )
                for kind, template, title, text in TEMPLATES
            ]
        )

    # -- subscribing

    async def _watch(self, text: str) -> Unwatch:
        ref = parse(text)
        await self._allowed(ref)
        return await self.bus.watch(text, ref)

    async def subscribe_resource(
        self, ctx: Any, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """``resources/subscribe``: this connection hears the URI's updates until it
        unsubscribes or closes (subscribing twice is subscribing once)."""
        with _as_mcp_errors("resources/subscribe"):
            connection = _connection(ctx)
            mine = self._subscriptions(connection)
            if params.uri in mine:
                return types.EmptyResult()
            if len(mine) >= MAX_WATCHES:
                raise InvalidArgument(f"a client may subscribe to at most {MAX_WATCHES} URIs")
            unwatch = await self._watch(params.uri)
            if params.uri in mine:  # a concurrent subscribe of the same URI won
                await unwatch()
                return types.EmptyResult()
            mine[params.uri] = unwatch
            self._by_uri.setdefault(params.uri, {})[id(connection)] = connection
        return types.EmptyResult()

    async def unsubscribe_resource(
        self, ctx: Any, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        """``resources/unsubscribe``: no more updates of the URI on this connection."""
        with _as_mcp_errors("resources/unsubscribe"):
            await self._drop(_connection(ctx), params.uri)
        return types.EmptyResult()

    def _subscriptions(self, connection: Any) -> dict[str, Unwatch]:
        """The connection's subscriptions (URI -> unwatch), ended when it closes."""
        mine: dict[str, Unwatch] | None = connection.state.get(_STATE)
        if mine is None:
            mine = connection.state[_STATE] = {}
            connection.exit_stack.push_async_callback(self._drop_all, connection)
        return mine

    async def _drop(self, connection: Any, text: str) -> None:
        unwatch = connection.state.get(_STATE, {}).pop(text, None)
        holders = self._by_uri.get(text, {})
        holders.pop(id(connection), None)
        if not holders:
            self._by_uri.pop(text, None)
        if unwatch is not None:
            with anyio.CancelScope(shield=True):
                await unwatch()

    async def _drop_all(self, connection: Any) -> None:
        for text in list(connection.state.get(_STATE, {})):
            await self._drop(connection, text)

    def _deliver(self, event: ServerEvent) -> None:
        """The bus's listener for ``resources/subscribe``: send the update on every
        connection subscribed to its URI (in tasks: a listener must not block)."""
        if not isinstance(event, ResourceUpdated):
            return
        for connection in list(self._by_uri.get(event.uri, {}).values()):
            task = asyncio.get_running_loop().create_task(
                connection.send_resource_updated(event.uri)
            )
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def subscriptions_listen(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen`` (2026-07-28): the SDK's ``ListenHandler``, with the
        stream's URIs watched while it is open (refused, before the acknowledgment, if one
        cannot be read)."""
        wanted = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        unwatches: list[Unwatch] = []
        try:
            with _as_mcp_errors("subscriptions/listen"):
                if len(wanted) > MAX_WATCHES:
                    raise InvalidArgument(f"a stream may watch at most {MAX_WATCHES} URIs")
                for text in wanted:
                    unwatches.append(await self._watch(text))
            return await self.listen_handler(ctx, params)
        finally:
            with anyio.CancelScope(shield=True):
                for unwatch in unwatches:
                    await unwatch()

    async def close(self) -> None:
        """End every subscription of this server (its session_listeners rows go)."""
        self.listen_handler.close()
        await self.bus.close()


def _connection(ctx: Any) -> Any:
    """The MCP connection of a request (``mcp.server.connection.Connection``): where a
    classic subscription lives, and what ends it. The SDK's lowlevel context does not
    expose it; its session proxy holds it."""
    connection = getattr(ctx.session, "_connection", None)
    if connection is None:  # pragma: no cover - an SDK change; the tests would show it
        raise RuntimeError("this MCP SDK does not expose the request's connection")
    return connection
