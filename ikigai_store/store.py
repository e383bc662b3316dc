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

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from . import migrate as _migrate
from .db import Conn, Pool, redact, resolve_url, translate, translate_errors
from .errors import ConnectionLost, InvalidArgument, NotFound
from .models import VALID_KINDS, Message, ReplayContext, SearchHit, Session, is_valid_kind
from .replay import fold, rewind_target
from .sql import queries

__all__ = ["MAX_SEARCH_LIMIT", "Store", "open"]

#: Largest ``limit`` ``Store.search`` honours; larger values are capped to it.
MAX_SEARCH_LIMIT = 1000
_MAX_ID = 2**63 - 1


def open(url: str | None = None, *, migrate: bool = True, pool_size: int = 4) -> Store:
    """Open a store on ``url``, ``IKIGAI_DATABASE_URL``, ``DATABASE_URL`` or the embedded server.

    With ``migrate=True`` (default) pending migrations are applied first. Raises ``ConnectError``
    when the database cannot be reached and ``MigrationError`` when a migration fails.
    """
    resolved = resolve_url(url)
    data_dir = None
    if resolved is None:
        from .db import default_data_dir, embedded_url

        data_dir = default_data_dir()
        resolved = embedded_url(data_dir)
    store = Store(resolved, pool_size=pool_size)
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

    def __init__(self, url: str, *, pool_size: int = 4, timeout: float = 10.0) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidArgument("pool_size must be a positive integer")
        self.url = url
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
        conn = pinned if pinned is not None else self._pool.get()
        try:
            if atomic or pinned is not None:
                with conn.transaction():
                    yield conn
            else:
                yield conn
        except psycopg.Error as exc:
            error = translate(exc, conn)
            if isinstance(error, ConnectionLost):
                self._pool.discard_idle()  # the outage probably killed them too
            raise error from exc
        finally:
            if pinned is None:
                self._pool.put(conn)

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
        conn = self._pool.get()
        self._local.conn = conn
        try:
            with conn.transaction(force_rollback=force_rollback):
                yield self
        except psycopg.Error as exc:
            error = translate(exc, conn)
            if isinstance(error, ConnectionLost):
                self._pool.discard_idle()
            raise error from exc
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
        """Append one event to a session and return it as stored.

        Raises ``InvalidArgument`` (and writes nothing) for an unknown kind, a bad or missing
        session, NUL characters, data that is not JSON, a mark whose ``data.label`` is not a
        string or null, or a rewind whose ``data.target_message_id`` is not the id of a mark
        event of the same session.
        """
        _check_id(session_id, "session_id")
        if not is_valid_kind(kind):
            raise InvalidArgument(
                f"invalid event kind {kind!r}; valid kinds: {', '.join(sorted(VALID_KINDS))}"
            )
        if agent_uuid is not None:
            raise InvalidArgument("agent_uuid is not supported by this schema version")
        _check_text(content, "content")
        data_json = _dump_json(data)
        label = data.get("label") if kind == "mark" and isinstance(data, dict) else None
        if label is not None and not isinstance(label, str):
            raise InvalidArgument("a mark's data.label must be a string or null")
        if kind == "rewind":
            return self._append_rewind(session_id, content, data, data_json)
        with self._connection() as conn:
            try:
                row = queries.append_message(
                    conn, session_id=session_id, kind=kind, content=content, data=data_json
                )
            except psycopg.errors.ForeignKeyViolation as exc:
                raise InvalidArgument(f"session {session_id} does not exist") from exc
        return Message.from_row(row)

    def _append_rewind(
        self, session_id: int, content: str | None, data: Any, data_json: str | None
    ) -> Message:
        target = rewind_target(data)
        if target is None:
            raise InvalidArgument("a rewind needs an integer data.target_message_id")
        with self._connection() as conn:
            row = queries.append_rewind(
                conn,
                session_id=session_id,
                content=content,
                data=data_json,
                target_message_id=target,
            )
            if row is None:
                if not queries.session_exists(conn, session_id=session_id):
                    raise InvalidArgument(f"session {session_id} does not exist")
                raise InvalidArgument(
                    f"rewind target {target} is not a mark event of session {session_id}"
                )
        return Message.from_row(row)

    def messages(self, session_id: int) -> list[Message]:
        """Every event of a session (the full audit trail), in id order."""
        _check_id(session_id, "session_id")
        with self._connection() as conn:
            rows = list(queries.session_messages(conn, session_id=session_id))
            if not rows:
                self._require_session(conn, session_id)
        return [Message.from_row(r) for r in rows]

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
            rows = list(queries.session_live_events(conn, session_id=session_id))
            if not rows:
                self._require_session(conn, session_id)
        return fold(Message.from_row(r) for r in rows)

    @staticmethod
    def _require_session(conn: Conn, session_id: int) -> None:
        if not queries.session_exists(conn, session_id=session_id):
            raise NotFound(f"session {session_id} does not exist")

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


# -------------------------------------------------------------------- validation


def _check_id(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_ID:
        raise InvalidArgument(f"{name} must be a positive integer, got {value!r}")


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
