"""The Store: sessions, the append-only event stream, replay and search over one database.

Owns connection handling (``db.Pool``: autocommit connections) and the public write and read
operations; every statement it runs is a named query from ``queries/``. Invariants:
- every public write is atomic: one statement, or one transaction; inside ``store.transaction()``
  each write runs in a savepoint, so a rejected write leaves the caller's transaction usable;
- bad input raises ``InvalidArgument`` before anything is written; no psycopg exception escapes
  (``db.translate``); a dropped connection raises ``ConnectionLost`` and the pool drops it, so
  the next call reconnects;
- events are ordered by ``id`` only; ``messages`` rows are never updated or deleted here.
"""

from __future__ import annotations

import base64
import enum
import functools
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from . import migrate as _migrate
from .db import Conn, Pool, redact, resolve_url, translate, translate_errors
from .errors import ConnectError, ConnectionLost, IkigaiStoreError, InvalidArgument, NotFound
from .models import (
    VALID_KINDS,
    Agent,
    Message,
    ReplayContext,
    ReplayRange,
    SearchHit,
    Session,
    is_valid_kind,
)
from .replay import fold, rewind_target
from .sql import queries

__all__ = ["MAX_SEARCH_LIMIT", "UNSET", "Store", "new_agent_uuid", "open"]

#: Largest ``limit`` ``Store.search`` honours; larger values are capped to it.
MAX_SEARCH_LIMIT = 1000
_MAX_ID = 2**63 - 1


class _Rejected(Exception):
    """Internal: a constraint refused an append; ``Store._rejected_append`` explains it."""


class _Unset(enum.Enum):
    UNSET = "UNSET"


#: Default of optional update arguments: "leave this field as it is" (None clears it).
UNSET = _Unset.UNSET


def new_agent_uuid() -> str:
    """A new agent id as ikigai makes them: 16 random bytes, base64url, no padding (22 chars).

    Ids starting with "-" are drawn again, so a command line never mistakes one for an option.
    """
    while True:
        uuid = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")
        if not uuid.startswith("-"):
            return uuid


def open(url: str | None = None, *, migrate: bool = True, pool_size: int = 4) -> Store:
    """Open a store on ``url``, ``IKIGAI_DATABASE_URL``, ``DATABASE_URL`` or the embedded server.

    With ``migrate=True`` (default) pending migrations are applied first. Raises ``ConnectError``
    when the database cannot be reached and ``MigrationError`` when a migration fails.
    """
    resolved = resolve_url(url)
    data_dir = None
    revive = None
    if resolved is None:
        from .embedded import default_data_dir, embedded_url

        data_dir = default_data_dir()
        resolved = embedded_url(data_dir)
        revive = functools.partial(embedded_url, data_dir)  # restarts a server that died
    store = Store(resolved, pool_size=pool_size, on_unavailable=revive)
    store.embedded_data_dir = data_dir
    if migrate:
        try:
            store.migrate()
        except BaseException:
            store.close()
            raise
    return store


class Store:
    """A pool of connections to one ikigai database and the operations on it (thread-safe)."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        timeout: float = 10.0,
        on_unavailable: Callable[[], object] | None = None,
    ) -> None:
        """``on_unavailable()`` is called when no connection can be opened, then one retry is
        made: it may bring the database back (``open()`` passes one restarting the embedded
        server) or raise."""
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidArgument("pool_size must be a positive integer")
        self.url = url
        self._on_unavailable = on_unavailable
        #: Data directory of the embedded server this store runs on (None for other servers).
        self.embedded_data_dir: Path | None = None
        self._pool = Pool(url, max_size=pool_size, timeout=timeout)
        self._pool.put(self._pool.get())  # connect now: a bad URL fails here, not on first use
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"<Store {redact(self.url)}>"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection of the store. Idempotent."""
        self._pool.close()

    # ---------------------------------------------------------------- connections, transactions

    @contextmanager
    def _connection(self, *, atomic: bool = False) -> Iterator[Conn]:
        """A connection for one operation, translating psycopg errors.

        Inside ``transaction()`` it is the transaction's connection and the operation runs in a
        savepoint (so a rejected write leaves the caller's transaction usable); otherwise it comes
        from the pool, in autocommit mode. ``atomic=True`` wraps the operation in a transaction
        even outside ``transaction()`` (for multi-statement writes).
        """
        pinned: Conn | None = getattr(self._local, "conn", None)
        conn = pinned if pinned is not None else self._checkout()
        try:
            if atomic or pinned is not None:
                with conn.transaction():
                    yield conn
            else:
                yield conn
        except psycopg.Error as exc:
            raise self._translate(exc, conn) from exc
        finally:
            if pinned is None:
                self._pool.put(conn)

    def _checkout(self) -> Conn:
        """A pooled connection; if none can be opened, ``on_unavailable`` gets one chance."""
        try:
            return self._pool.get()
        except ConnectError as exc:
            if self._on_unavailable is None or not isinstance(exc.__cause__, psycopg.Error):
                raise  # no hook, or not a failed connection attempt (closed store, pool full)
            self._on_unavailable()
            return self._pool.get()

    def _translate(self, exc: psycopg.Error, conn: Conn) -> IkigaiStoreError:
        error = translate(exc, conn)
        if isinstance(error, ConnectionLost):
            self._pool.discard_idle()  # the outage probably killed them too
        return error

    @contextmanager
    def transaction(self, *, force_rollback: bool = False) -> Iterator[Store]:
        """Group the store calls made inside the block (on this thread) into one transaction.

        Leaving the block normally commits; an exception rolls every write of the block back and
        propagates. Nested blocks are savepoints. ``force_rollback=True`` always rolls back
        (the pytest plugin isolates tests with it).
        """
        pinned: Conn | None = getattr(self._local, "conn", None)
        if pinned is not None:
            with translate_errors(pinned), pinned.transaction(force_rollback=force_rollback):
                yield self
            return
        conn = self._checkout()
        self._local.conn = conn
        try:
            with conn.transaction(force_rollback=force_rollback):
                yield self
        except psycopg.Error as exc:
            raise self._translate(exc, conn) from exc
        finally:
            self._local.conn = None
            self._pool.put(conn)

    # ---------------------------------------------------------------- schema

    def migrate(self, progress: Callable[[str], None] | None = None) -> list[str]:
        """Apply pending migrations; return the ids applied now (``[]`` when up to date).

        ``progress(migration_id)`` is called before each migration is applied.
        """
        return _migrate.apply(self.url, progress=progress)

    def pending_migrations(self) -> list[str]:
        """Ids of the migrations not applied yet."""
        return _migrate.pending(self.url)

    def schema_version(self) -> int:
        """The version in ``schema_metadata`` (0 on a database without the schema)."""
        with self._connection() as conn:
            if not queries.schema_metadata_exists(conn):
                return 0
            return int(queries.schema_version(conn) or 0)

    # ---------------------------------------------------------------- sessions

    def create_session(self, title: str | None = None) -> int:
        """Start a session and return its id; it stays active until ``end_session``."""
        _check_text(title, "title")
        with self._connection() as conn:
            row = queries.create_session(conn, title=title)
        return int(row["id"])

    def get_active_session(self) -> int | None:
        """The most recently started session that has not ended, or None."""
        with self._connection() as conn:
            row = queries.get_active_session(conn)
        return None if row is None else int(row["id"])

    def end_session(self, session_id: int) -> None:
        """End a session (``ended_at = NOW()``; ending it again keeps the first time)."""
        _check_id(session_id, "session_id")
        with self._connection() as conn:
            row = queries.end_session(conn, session_id=session_id)
        if row is None:
            raise NotFound(f"session {session_id} does not exist")

    def get_session(self, session_id: int) -> Session:
        """One session; ``NotFound`` if it does not exist."""
        _check_id(session_id, "session_id")
        with self._connection() as conn:
            row = queries.get_session(conn, session_id=session_id)
        if row is None:
            raise NotFound(f"session {session_id} does not exist")
        return Session.from_row(row)

    def list_sessions(self, limit: int = 50) -> list[Session]:
        """Up to ``limit`` sessions, newest first."""
        _check_limit(limit)
        with self._connection() as conn:
            return [Session.from_row(r) for r in queries.list_sessions(conn, limit=limit)]

    def set_session_title(self, session_id: int, title: str | None) -> None:
        """Set (or clear, with None) a session's title."""
        _check_id(session_id, "session_id")
        _check_text(title, "title")
        with self._connection() as conn:
            row = queries.set_session_title(conn, session_id=session_id, title=title)
        if row is None:
            raise NotFound(f"session {session_id} does not exist")

    # ---------------------------------------------------------------- events

    def append(
        self,
        session_id: int,
        kind: str,
        content: str | None = None,
        data: Any = None,
        *,
        agent_uuid: str | None = None,
    ) -> Message:
        """Append one event to a session (and to one of its agents) and return it as stored.

        Raises ``InvalidArgument`` (and writes nothing) for an unknown kind, a bad or missing
        session, an ``agent_uuid`` that is not an agent of that session, NUL characters, data
        that is not JSON, a mark whose ``data.label`` is not a string or null, or a rewind whose
        ``data.target_message_id`` is not the id of a mark event of the same session.
        """
        _check_id(session_id, "session_id")
        if not is_valid_kind(kind):
            raise InvalidArgument(
                f"invalid event kind {kind!r}; valid kinds: {', '.join(sorted(VALID_KINDS))}"
            )
        if agent_uuid is not None:
            _check_uuid(agent_uuid)
        _check_text(content, "content")
        data_json = _dump_json(data)
        label = data.get("label") if kind == "mark" and isinstance(data, dict) else None
        if label is not None and not isinstance(label, str):
            raise InvalidArgument("a mark's data.label must be a string or null")
        target = None
        if kind == "rewind":
            target = rewind_target(data)
            if target is None:
                raise InvalidArgument("a rewind needs an integer data.target_message_id")
        try:
            with self._connection() as conn:
                try:
                    if target is None:
                        row = queries.append_message(
                            conn,
                            session_id=session_id,
                            agent_uuid=agent_uuid,
                            kind=kind,
                            content=content,
                            data=data_json,
                        )
                    else:
                        row = queries.append_rewind(
                            conn,
                            session_id=session_id,
                            agent_uuid=agent_uuid,
                            content=content,
                            data=data_json,
                            target_message_id=target,
                        )
                except psycopg.errors.ForeignKeyViolation as exc:
                    raise _Rejected from exc  # leaves (and rolls back) the failed statement
                if row is None:
                    raise _Rejected
        except _Rejected as rejected:
            with self._connection() as conn:  # say why, on this rare path only
                raise self._rejected_append(conn, session_id, agent_uuid, target) from (
                    rejected.__cause__
                )
        return Message.from_row(row)

    @staticmethod
    def _rejected_append(
        conn: Conn, session_id: int, agent_uuid: str | None, target: int | None
    ) -> InvalidArgument:
        """Why an append wrote nothing (only computed on that rare path)."""
        if not queries.session_exists(conn, session_id=session_id):
            return InvalidArgument(f"session {session_id} does not exist")
        if agent_uuid is not None:
            agent = queries.get_agent(conn, uuid=agent_uuid)
            if agent is None or int(agent["session_id"]) != session_id:
                return InvalidArgument(
                    f"agent {agent_uuid} is not an agent of session {session_id}"
                )
        return InvalidArgument(
            f"rewind target {target} is not a mark event of session {session_id}"
        )

    def messages(self, session_id: int) -> list[Message]:
        """Every event of a session (the full audit trail), in id order."""
        _check_id(session_id, "session_id")
        with self._connection() as conn:
            events = fetch_messages(conn, queries.session_messages, session_id=session_id)
            if events is None:
                self._require_session(conn, session_id)
        return events or []

    def count_messages(self, session_id: int) -> int:
        """How many events the session has (its whole history)."""
        _check_id(session_id, "session_id")
        with self._connection() as conn:
            count = int(queries.count_session_messages(conn, session_id=session_id))
            if count == 0:
                self._require_session(conn, session_id)
        return count

    def replay_session(self, session_id: int) -> ReplayContext:
        """Rebuild the session's current context, honouring clear, mark and rewind.

        Reads only the events after the session's newest clear (one index probe finds it).
        """
        _check_id(session_id, "session_id")
        with self._connection() as conn:
            events = fetch_messages(conn, queries.session_live_events, session_id=session_id)
            if events is None:
                self._require_session(conn, session_id)
        return fold(events or [])

    @staticmethod
    def _require_session(conn: Conn, session_id: int) -> None:
        if not queries.session_exists(conn, session_id=session_id):
            raise NotFound(f"session {session_id} does not exist")

    # ---------------------------------------------------------------- agents

    def create_agent(
        self,
        session_id: int,
        *,
        name: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        thinking_level: str | None = None,
    ) -> Agent:
        """Register a root agent (no parent) in a session."""
        _check_id(session_id, "session_id")
        _check_texts(name=name, provider=provider, model=model, thinking_level=thinking_level)
        with self._connection() as conn:
            try:
                row = queries.create_agent(
                    conn,
                    uuid=new_agent_uuid(),
                    session_id=session_id,
                    name=name,
                    provider=provider,
                    model=model,
                    thinking_level=thinking_level,
                )
            except psycopg.errors.ForeignKeyViolation as exc:
                raise InvalidArgument(f"session {session_id} does not exist") from exc
        return Agent.from_row(row)

    def fork_agent(
        self,
        parent_uuid: str,
        *,
        name: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        thinking_level: str | None = None,
    ) -> Agent:
        """Fork a running agent: one new row, no message copied, constant work.

        The child inherits the parent's history up to the parent's newest own event
        (``fork_message_id``; 0 when the parent has none) and, when not given, its provider,
        model and thinking level. ``NotFound`` if the parent does not exist,
        ``InvalidArgument`` if it is not running.
        """
        _check_uuid(parent_uuid)
        _check_texts(name=name, provider=provider, model=model, thinking_level=thinking_level)
        with self._connection() as conn:
            row = queries.fork_agent(
                conn,
                uuid=new_agent_uuid(),
                parent_uuid=parent_uuid,
                name=name,
                provider=provider,
                model=model,
                thinking_level=thinking_level,
            )
            if row is None:
                parent = self._require_agent(conn, parent_uuid)
                raise InvalidArgument(f"agent {parent_uuid} is {parent.status}, not running")
        return Agent.from_row(row)

    def get_agent(self, uuid: str) -> Agent:
        """One agent; ``NotFound`` if it does not exist."""
        _check_uuid(uuid)
        with self._connection() as conn:
            return self._require_agent(conn, uuid)

    @staticmethod
    def _require_agent(conn: Conn, uuid: str) -> Agent:
        row = queries.get_agent(conn, uuid=uuid)
        if row is None:
            raise NotFound(f"agent {uuid} does not exist")
        return Agent.from_row(row)

    def kill_agent(self, uuid: str) -> list[str]:
        """Mark the agent and all its running descendants dead; return their uuids.

        Only the agents table changes: append an ``agent_killed`` event yourself if you want
        one in the stream. Killing a dead agent kills its running descendants, if any.
        """
        _check_uuid(uuid)
        with self._connection() as conn:
            rows = list(queries.kill_agent(conn, uuid=uuid))
            if not rows:
                self._require_agent(conn, uuid)
        return [r["uuid"] for r in sorted(rows, key=lambda r: int(r["id"]))]

    def reap_agent(self, uuid: str) -> None:
        """Move a dead agent to ``reaped``. ``InvalidArgument`` if it is still running."""
        _check_uuid(uuid)
        with self._connection() as conn:
            status = queries.reap_agent(conn, uuid=uuid)
        if status is None:
            raise NotFound(f"agent {uuid} does not exist")
        if status["status"] == "running":
            raise InvalidArgument(f"agent {uuid} is running: kill it before reaping")

    def set_agent_idle(self, uuid: str, idle: bool) -> None:
        """Set or clear an agent's idle flag."""
        _check_uuid(uuid)
        if not isinstance(idle, bool):
            raise InvalidArgument("idle must be a bool")
        with self._connection() as conn:
            if queries.set_agent_idle(conn, uuid=uuid, idle=idle) is None:
                raise NotFound(f"agent {uuid} does not exist")

    def update_agent_model(
        self,
        uuid: str,
        *,
        provider: str | _Unset | None = UNSET,
        model: str | _Unset | None = UNSET,
        thinking_level: str | _Unset | None = UNSET,
    ) -> Agent:
        """Change an agent's provider, model and/or thinking level (None clears a field)."""
        _check_uuid(uuid)
        _check_texts(
            provider=None if provider is UNSET else provider,
            model=None if model is UNSET else model,
            thinking_level=None if thinking_level is UNSET else thinking_level,
        )
        with self._connection() as conn:
            row = queries.update_agent_model(
                conn,
                uuid=uuid,
                set_provider=provider is not UNSET,
                provider=None if provider is UNSET else provider,
                set_model=model is not UNSET,
                model=None if model is UNSET else model,
                set_thinking=thinking_level is not UNSET,
                thinking_level=None if thinking_level is UNSET else thinking_level,
            )
        if row is None:
            raise NotFound(f"agent {uuid} does not exist")
        return Agent.from_row(row)

    def running_agents(self, session_id: int | None = None) -> list[Agent]:
        """Running agents (of one session, or all), parents before children."""
        if session_id is not None:
            _check_id(session_id, "session_id")
        with self._connection() as conn:
            rows = queries.running_agents(conn, session_id=session_id)
            return [Agent.from_row(r) for r in rows]

    def children(self, uuid: str) -> list[Agent]:
        """Direct children of an agent (any status), oldest first."""
        _check_uuid(uuid)
        with self._connection() as conn:
            rows = list(queries.agent_children(conn, uuid=uuid))
            if not rows:
                self._require_agent(conn, uuid)
        return [Agent.from_row(r) for r in rows]

    def ensure_root_agent(self, session_id: int, **fields: str | None) -> Agent:
        """The session's root agent ("agent zero"), created if missing; events of the session
        that belong to no agent are given to it. Safe to call concurrently and repeatedly.

        ``fields`` (name, provider, model, thinking_level) apply only when it is created.
        """
        _check_id(session_id, "session_id")
        unknown = set(fields) - {"name", "provider", "model", "thinking_level"}
        if unknown:
            raise InvalidArgument(f"unknown agent fields: {', '.join(sorted(unknown))}")
        _check_texts(**fields)
        with self._connection(atomic=True) as conn:
            if queries.lock_session(conn, session_id=session_id) is None:
                raise NotFound(f"session {session_id} does not exist")
            row = queries.session_root_agent(conn, session_id=session_id)
            if row is None:
                row = queries.create_agent(
                    conn,
                    uuid=new_agent_uuid(),
                    session_id=session_id,
                    name=fields.get("name"),
                    provider=fields.get("provider"),
                    model=fields.get("model"),
                    thinking_level=fields.get("thinking_level"),
                )
            queries.adopt_orphan_messages(conn, session_id=session_id, uuid=row["uuid"])
        return Agent.from_row(row)

    def find_clear(self, agent_uuid: str, max_id: int | None = None) -> int:
        """Id of the agent's newest own ``clear`` with id <= ``max_id`` (None: any); 0 if none."""
        _check_uuid(agent_uuid)
        if max_id is not None and (isinstance(max_id, bool) or not isinstance(max_id, int)):
            raise InvalidArgument("max_id must be an integer or None")
        with self._connection() as conn:
            return int(queries.find_clear(conn, agent_uuid=agent_uuid, max_id=max_id))

    def replay_ranges(self, agent_uuid: str) -> list[ReplayRange]:
        """The id ranges of the agent's virtual history after its newest clear, root first.

        One ``WITH RECURSIVE`` statement (see queries/agents.sql). ``NotFound`` if missing.
        """
        _check_uuid(agent_uuid)
        with self._connection() as conn:
            rows = list(queries.replay_ranges(conn, agent_uuid=agent_uuid))
        if not rows:
            raise NotFound(f"agent {agent_uuid} does not exist")
        return [ReplayRange.from_row(r) for r in rows]

    def query_range(self, replay_range: ReplayRange) -> list[Message]:
        """The agent's own events in ``start_id < id <= end_id``, in id order."""
        if not isinstance(replay_range, ReplayRange):
            raise InvalidArgument("query_range needs a ReplayRange")
        _check_uuid(replay_range.agent_uuid)
        with self._connection() as conn:
            events = fetch_messages(
                conn,
                queries.query_range,
                agent_uuid=replay_range.agent_uuid,
                start_id=replay_range.start_id,
                end_id=replay_range.end_id,
            )
        return events or []

    def replay_agent(self, agent_uuid: str) -> ReplayContext:
        """Rebuild an agent's context from its virtual history (inherited ranges, then its own),
        honouring clear, mark and rewind exactly like ``replay_session``.

        One statement at any depth: the range walk and the events come back together.
        """
        _check_uuid(agent_uuid)
        with self._connection() as conn:
            events = fetch_messages(conn, queries.replay_agent_events, agent_uuid=agent_uuid)
        if events is None:
            raise NotFound(f"agent {agent_uuid} does not exist")
        return fold(events)

    # ---------------------------------------------------------------- agent conveniences

    def mark(self, agent_uuid: str, label: str | None = None) -> Message:
        """Append a mark for the agent (``content`` and ``data.label`` = label)."""
        agent = self.get_agent(agent_uuid)
        return self.append(agent.session_id, "mark", label, {"label": label}, agent_uuid=agent_uuid)

    def rewind(self, agent_uuid: str, label: str | None = None) -> Message:
        """Rewind the agent to the newest mark on its current replayed stack whose label is
        ``label`` (the newest mark when None). ``InvalidArgument`` when there is none.

        Marks are looked up in this agent's replayed context only (inherited ones included),
        never in another agent's, unlike the C program's per-session lookup.
        """
        _check_uuid(agent_uuid)
        _check_text(label, "label")
        with self.transaction():
            agent = self.get_agent(agent_uuid)
            marks = self.replay_agent(agent_uuid).marks
            target = next((m for m in reversed(marks) if label is None or m.label == label), None)
            if target is None:
                wanted = "a mark" if label is None else f"a mark labelled {label!r}"
                raise InvalidArgument(f"agent {agent_uuid} has no {wanted} on its stack")
            return self.append(
                agent.session_id,
                "rewind",
                target.label,
                {"target_message_id": target.message_id, "target_label": target.label},
                agent_uuid=agent_uuid,
            )

    def clear(self, agent_uuid: str) -> Message:
        """Append a clear for the agent: its context (and what later forks inherit) restarts."""
        agent = self.get_agent(agent_uuid)
        return self.append(agent.session_id, "clear", agent_uuid=agent_uuid)

    # ---------------------------------------------------------------- search

    def search(
        self, query: str, *, session_id: int | None = None, limit: int = 50
    ) -> list[SearchHit]:
        """Full-text search (web-search syntax: quotes, ``or``, ``-term``), best match first.

        Any text is accepted; an empty or stop-word-only query finds nothing. ``limit`` is
        capped at ``MAX_SEARCH_LIMIT``.
        """
        if not isinstance(query, str):
            raise InvalidArgument("search query must be a string")
        _check_text(query, "query")
        if session_id is not None:
            _check_id(session_id, "session_id")
        _check_limit(limit)
        if not query.strip():
            return []
        with self._connection() as conn:
            rows = queries.search_messages(
                conn, query=query, session_id=session_id, limit=min(limit, MAX_SEARCH_LIMIT)
            )
            return [SearchHit.from_row(r) for r in rows]

    # ---------------------------------------------------------------- tests

    def truncate_all(self) -> None:
        """Delete every session and event and restart the ids (for tests)."""
        with self._connection() as conn:
            queries.truncate_all(conn)


# -------------------------------------------------------------------- reading events

_MESSAGE_COLUMNS = tuple(Message.__dataclass_fields__)


def fetch_messages(conn: Conn, query: Any, **params: Any) -> list[Message] | None:
    """Run a named query returning message rows, decoded the fast way (binary, tuples).

    Event reads are the hot path of replay: binary results skip timestamp parsing and tuple
    rows skip a dict per row. The query must select exactly ``Message``'s fields in order.
    All-NULL rows (empty ranges of ``replay_agent_events``) are skipped; None means the query
    returned no row at all.
    """
    with conn.cursor(row_factory=tuple_row, binary=True) as cur:
        cur.execute(query.sql, params)
        if cur.description is None or tuple(c.name for c in cur.description) != _MESSAGE_COLUMNS:
            raise TypeError(f"{query.__name__} does not select the Message columns in order")
        rows = cur.fetchall()
    if not rows:
        return None
    return [Message(*row) for row in rows if row[0] is not None]


# -------------------------------------------------------------------- validation


def _check_id(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_ID:
        raise InvalidArgument(f"{name} must be a positive integer, got {value!r}")


def _check_uuid(value: object) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= 64 or "\x00" in value:
        raise InvalidArgument(f"agent uuid must be a non-empty string, got {value!r}")


def _check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit must be a positive integer, got {limit!r}")


def _check_text(value: object, name: str) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string or None, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidArgument(f"{name} contains a NUL character, which PostgreSQL cannot store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{name} is not valid Unicode text: {exc.reason}") from exc


def _check_texts(**values: object) -> None:
    for name, value in values.items():
        _check_text(value, name)


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False


def _dump_json(data: Any) -> str | None:
    """Serialise ``data`` once, rejecting what JSON or PostgreSQL's jsonb cannot hold."""
    if data is None:
        return None
    try:
        text = json.dumps(data, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")  # lone surrogates
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidArgument(f"data is not JSON-serialisable: {exc}") from exc
    # json escapes NUL as \u0000; only then is the (slower) exact walk needed.
    if "\\u0000" in text and _has_nul(data):
        raise InvalidArgument("data contains a NUL character, which PostgreSQL cannot store")
    return text
