"""The sync face: ``Store``, sessions, events, agents, replay and search over one database.

Owns the thread-facing API: a pool of connections (``pool.Pool``), transactions, and one thin
method per operation. The work itself lives in the area modules (``sessions``, ``events``,
``agents``, ``search``, ``admin``) as operations that ``ops.run`` drives; ``AsyncStore``
(``aio``) drives the very same operations, so both faces behave alike. Invariants:
- every public write is atomic: one statement, or one transaction; inside
  ``store.transaction()`` each operation runs in a savepoint, so a rejected write leaves the
  caller's transaction usable;
- bad input raises ``InvalidArgument`` before anything is written; no psycopg exception escapes
  (``errors.translate``); a dropped connection raises ``ConnectionLost`` and the pool checks the
  server before it trusts its connections again;
- the connection of ``store.transaction()`` is pinned in a ``ContextVar`` (per thread, and per
  asyncio task for the async face), never shared between threads.
"""

from __future__ import annotations

import builtins
import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import psycopg

from . import (
    activities,
    admin,
    agents,
    events,
    identities,
    leases,
    mail,
    ops,
    plans,
    reviews,
    search,
    sessions,
    summaries,
    tasks,
    topics,
)
from . import migrate as _migrate
from .agents import UNSET, Unset, new_agent_uuid
from .config import redact, resolve_url
from .errors import ConnectionLost, IkigaiStoreError, InvalidArgument, translate
from .identities import identity_name
from .models import (
    Activity,
    Agent,
    AgentSummary,
    Claim,
    ContextSummary,
    DeadLetter,
    Identity,
    IdentityStatus,
    InboxItem,
    Lease,
    Mail,
    MailCounts,
    MailHit,
    Message,
    PlanReview,
    Poll,
    Queued,
    ReplayContext,
    ReplayRange,
    Review,
    ReviewIssue,
    ReviewIteration,
    SearchHit,
    Session,
    Task,
    TaskList,
    TaskStats,
    Topic,
    TopicInfo,
)
from .notify import MAIL, QUEUE, RETRY, Listener
from .outbox import Outbox
from .pool import Conn, Pool
from .search import MAX_SEARCH_LIMIT
from .validate import check_seconds

__all__ = [
    "MAX_SEARCH_LIMIT",
    "UNSET",
    "ActivityCalls",
    "IdentityCalls",
    "LeaseCalls",
    "MailCalls",
    "PlanCalls",
    "ReviewCalls",
    "Store",
    "SummaryCalls",
    "TaskCalls",
    "TopicCalls",
    "new_agent_uuid",
    "open",
]

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
    from .embedded import default_data_dir, embedded_url

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
        """``on_unavailable()`` is called when the server cannot be reached after a connection
        was lost, then it is tried once more: the hook may bring the database back (``open()``
        passes one that restarts the embedded server) or raise."""
        check_pool_options(pool_size, timeout)
        self._conninfo = resolve_url(url) or ""
        #: Data directory of the embedded server this store runs on (None for other servers).
        self.embedded_data_dir: Path | None = None
        self._pool = Pool(
            self._conninfo, max_size=pool_size, timeout=timeout, on_unavailable=on_unavailable
        )
        self._pinned: ContextVar[Conn | None] = ContextVar(f"ikigai_store_{id(self)}", default=None)
        self._listener = Listener(self._pool.probe)
        #: Identities: named participants of mail (``IdentityCalls``).
        self.identities = IdentityCalls(self)
        #: Direct mail between identities, and publishing to topics (``MailCalls``).
        self.mail = MailCalls(self)
        #: Topics, subscriptions, offsets and work queues (``TopicCalls``).
        self.topics = TopicCalls(self)
        #: Task lists, tasks with dependencies, claims (``TaskCalls``).
        self.tasks = TaskCalls(self)
        #: The activity feed (``ActivityCalls``).
        self.activities = ActivityCalls(self)
        #: Agent summaries and runtime context summaries (``SummaryCalls``).
        self.summaries = SummaryCalls(self)
        #: Leases on resources, enforced by the database (``LeaseCalls``).
        self.leases = LeaseCalls(self)
        #: Code reviews: the review state machine, iterations and issues (``ReviewCalls``).
        self.reviews = ReviewCalls(self)
        #: Plan reviews: plans approved before they are carried out (``PlanCalls``).
        self.plans = PlanCalls(self)

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
        return ops.run(lambda: self._scope(atomic), op, self._on_error)

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
                with conn.transaction():
                    yield conn
            else:
                yield conn

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        """Internal: a connection for raw SQL (the transaction's, in a savepoint, or a pooled
        autocommit one); psycopg errors raised in the block are translated."""
        with self._scope(False) as conn:
            try:
                yield conn
            except psycopg.Error as exc:
                raise self._on_error(exc, conn) from exc

    def _on_error(self, exc: psycopg.Error, conn: Any) -> IkigaiStoreError:
        error = translate(exc, conn)
        if isinstance(error, ConnectionLost):
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
                finally:
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

    # ---------------------------------------------------------------- operations
    # One line each: the operation (in its area module) is shared with AsyncStore.

    def schema_version(self) -> int:
        """The version in ``schema_metadata`` (0 on a database without the schema)."""
        return self._run(admin.schema_version())

    def create_session(self, title: str | None = None) -> int:
        """Start a session and return its id; it stays active until ``end_session``."""
        return self._run(sessions.create_session(title))

    def get_active_session(self) -> int | None:
        """The most recently started session that has not ended, or None."""
        return self._run(sessions.get_active_session())

    def end_session(self, session_id: int) -> None:
        """End a session (``ended_at = NOW()``; ending it again keeps the first time)."""
        return self._run(sessions.end_session(session_id))

    def get_session(self, session_id: int) -> Session:
        """One session; ``NotFound`` if it does not exist."""
        return self._run(sessions.get_session(session_id))

    def list_sessions(self, limit: int = 50) -> list[Session]:
        """Up to ``limit`` sessions, newest first."""
        return self._run(sessions.list_sessions(limit))

    def set_session_title(self, session_id: int, title: str | None) -> None:
        """Set (or clear, with None) a session's title."""
        return self._run(sessions.set_session_title(session_id, title))

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
        return self._run(events.append(session_id, kind, content, data, agent_uuid))

    def messages(self, session_id: int) -> list[Message]:
        """Every event of a session (the full audit trail), in id order."""
        return self._run(events.messages(session_id))

    def count_messages(self, session_id: int) -> int:
        """How many events the session has (its whole history)."""
        return self._run(events.count_messages(session_id))

    def replay_session(self, session_id: int) -> ReplayContext:
        """Rebuild the session's current context, honouring clear, mark and rewind.

        Reads only the events after the session's newest clear (one index probe finds it).
        """
        return self._run(events.replay_session(session_id))

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
        return self._run(agents.create_agent(session_id, name, provider, model, thinking_level))

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
        return self._run(agents.fork_agent(parent_uuid, name, provider, model, thinking_level))

    def get_agent(self, uuid: str) -> Agent:
        """One agent; ``NotFound`` if it does not exist."""
        return self._run(agents.get_agent(uuid))

    def kill_agent(self, uuid: str) -> list[str]:
        """Mark the agent and all its running descendants dead; return their uuids.

        Only the agents table changes: append an ``agent_killed`` event yourself if you want
        one in the stream. Killing a dead agent kills its running descendants, if any.
        """
        return self._run(agents.kill_agent(uuid))

    def reap_agent(self, uuid: str) -> None:
        """Move a dead agent to ``reaped``. ``InvalidArgument`` if it is still running."""
        return self._run(agents.reap_agent(uuid))

    def set_agent_idle(self, uuid: str, idle: bool) -> None:
        """Set or clear an agent's idle flag."""
        return self._run(agents.set_agent_idle(uuid, idle))

    def update_agent_model(
        self,
        uuid: str,
        *,
        provider: str | Unset | None = UNSET,
        model: str | Unset | None = UNSET,
        thinking_level: str | Unset | None = UNSET,
    ) -> Agent:
        """Change an agent's provider, model and/or thinking level (None clears a field)."""
        return self._run(agents.update_agent_model(uuid, provider, model, thinking_level))

    def running_agents(self, session_id: int | None = None) -> list[Agent]:
        """Running agents (of one session, or all), parents before children."""
        return self._run(agents.running_agents(session_id))

    def children(self, uuid: str) -> list[Agent]:
        """Direct children of an agent (any status), oldest first."""
        return self._run(agents.children(uuid))

    def ensure_root_agent(self, session_id: int, **fields: str | None) -> Agent:
        """The session's root agent ("agent zero"), created if missing; events of the session
        that belong to no agent are given to it. Safe to call concurrently and repeatedly.

        ``fields`` (name, provider, model, thinking_level) apply only when it is created.
        """
        return self._run(agents.ensure_root_agent(session_id, fields))

    def find_clear(self, agent_uuid: str, max_id: int | None = None) -> int:
        """Id of the agent's newest own ``clear`` with id <= ``max_id`` (None: any); 0 if none."""
        return self._run(agents.find_clear(agent_uuid, max_id))

    def replay_ranges(self, agent_uuid: str) -> list[ReplayRange]:
        """The id ranges of the agent's virtual history after its newest clear, root first.

        One ``WITH RECURSIVE`` statement (see queries/agents.sql). ``NotFound`` if missing.
        """
        return self._run(agents.replay_ranges(agent_uuid))

    def query_range(self, replay_range: ReplayRange) -> list[Message]:
        """The agent's own events in ``start_id < id <= end_id``, in id order."""
        return self._run(agents.query_range(replay_range))

    def replay_agent(self, agent_uuid: str) -> ReplayContext:
        """Rebuild an agent's context from its virtual history (inherited ranges, then its own),
        honouring clear, mark and rewind exactly like ``replay_session``.

        One statement at any depth: the range walk and the events come back together.
        """
        return self._run(agents.replay_agent(agent_uuid))

    def mark(self, agent_uuid: str, label: str | None = None) -> Message:
        """Append a mark for the agent (``content`` and ``data.label`` = label)."""
        return self._run(agents.mark(agent_uuid, label))

    def rewind(self, agent_uuid: str, label: str | None = None) -> Message:
        """Rewind the agent to the newest mark on its current replayed stack whose label is
        ``label`` (the newest mark when None). ``InvalidArgument`` when there is none.

        Marks are looked up in this agent's replayed context only (inherited ones included),
        never in another agent's, unlike the C program's per-session lookup.
        """
        return self._run(agents.rewind(agent_uuid, label))

    def clear(self, agent_uuid: str) -> Message:
        """Append a clear for the agent: its context (and what later forks inherit) restarts."""
        return self._run(agents.clear(agent_uuid))

    def search(
        self,
        query: str,
        *,
        session_id: int | None = None,
        limit: int = 50,
        agent_uuid: str | None = None,
        kinds: Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        order: str = "rank",
        before: SearchHit | None = None,
    ) -> list[SearchHit]:
        """Full-text search (web-search syntax: ``"phrase"``, ``or``, ``-term``).

        ``order="rank"``: the best matches among the newest 1000 (``CANDIDATES``), best first,
        with messages holding a plain multi-word query as an exact phrase first (looked for
        among the newest 10,000 matches); ``order="recent"``: matches newest first. The work
        done is bounded by these numbers, not by how many messages match. Filters:
        ``session_id``, ``agent_uuid`` (the agent's own events), ``kinds`` (e.g.
        ``["user", "assistant"]``), ``since`` (inclusive) and ``until`` (exclusive) on
        ``created_at`` (aware datetimes). ``before=`` the last hit of a page gives the next page.
        An empty or stop-word-only query finds nothing; ``limit`` is capped at
        ``MAX_SEARCH_LIMIT``. See ``ikigai_store.search`` for the exact semantics.
        """
        return self._run(
            search.search(
                query,
                session_id,
                limit,
                agent_uuid=agent_uuid,
                kinds=kinds,
                since=since,
                until=until,
                order=order,
                before=before,
            )
        )

    def search_terms(self, query: str) -> str:
        """The tsquery ``search(query)`` runs, as text (``'parser' & !'lexer'``).

        Empty when the query has no searchable word (empty, only stop words such as "the",
        only punctuation): such a query can match nothing, and ``search`` returns ``[]``.
        """
        return self._run(search.search_terms(query))

    def truncate_all(self) -> None:
        """Delete every session and event and restart the ids (for tests)."""
        return self._run(admin.truncate_all())


class IdentityCalls:
    """``store.identities``: named participants of mail (see ``ikigai_store.identities``).

    Wherever an identity is expected, its name or an ``Identity`` is accepted.
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def register(
        self,
        name: str | None = None,
        *,
        project_key: str | None = None,
        git_branch: str | None = None,
        purpose: str | None = None,
        working_dir: str | None = None,
        hostname: str | None = None,
        agent_uuid: str | None = None,
    ) -> Identity:
        """Create an identity (a memorable name such as ``BraveOtter`` when ``name`` is None).

        ``InvalidArgument`` for a name not matching ``NAME_PATTERN``, a name already taken, an
        unknown ``agent_uuid`` or one already bound to another identity.
        """
        return self._store._run(
            identities.register(
                name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid
            )
        )

    def get(self, name: str | Identity) -> Identity:
        """One identity (retired ones too); ``NotFound`` if there is none of that name."""
        return self._store._run(identities.get(name))

    def list(
        self, *, project_key: str | None = None, include_retired: bool = False
    ) -> list[Identity]:
        """Identities (of one project), most recently active first."""
        return self._store._run(identities.list_identities(project_key, include_retired))

    def for_session(
        self, session_key: str, *, project_key: str | None = None, git_branch: str | None = None
    ) -> Identity:
        """The identity of an external session (e.g. a Claude Code session id).

        Resolution: the key's mapping (unless that identity was retired), else the project's
        most recently active identity (when ``project_key`` is given), else a new identity with
        a memorable name; the mapping is stored. Refreshes ``last_active_at``. Concurrent first
        calls with one key resolve to one identity.
        """
        return self._store._run(identities.for_session(session_key, project_key, git_branch))

    def for_agent(self, agent_uuid: str) -> Identity:
        """The identity bound to a runtime agent, created on first use (named like the agent
        when that name is valid and free, else memorably). ``NotFound`` for an unknown agent."""
        return self._store._run(identities.for_agent(agent_uuid))

    def heartbeat(self, name: str | Identity) -> Identity:
        """Set ``last_active_at`` to now. ``InvalidArgument`` if the identity is retired."""
        return self._store._run(identities.heartbeat(name))

    def retire(self, name: str | Identity) -> Identity:
        """Retire an identity: it keeps its mail but can no longer send or receive.
        Retiring again changes nothing."""
        return self._store._run(identities.retire(name))

    def discover(self, *, project_key: str | None = None) -> builtins.list[IdentityStatus]:
        """Identities that are not retired, with unread counts and status (``active``: seen in
        the last 5 minutes, ``idle``: in the last 30, ``offline``), in one query."""
        return self._store._run(identities.discover(project_key))


class MailCalls:
    """``store.mail``: direct mail between identities (see ``ikigai_store.mail``).

    Wherever an identity is expected, its name or an ``Identity`` is accepted.
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def send(
        self,
        sender: str | Identity,
        to: Sequence[str | Identity] | str | Identity,
        subject: str,
        body: str,
        *,
        thread_id: str | None = None,
        parent_id: int | None = None,
        priority: str = "normal",
        deadline_at: datetime | None = None,
        attachments: Any = None,
        metadata: Any = None,
        idempotency_key: str | None = None,
    ) -> Mail:
        """Send a mail to every identity in ``to`` (atomically: all recipients or none).

        Starts a new thread unless ``thread_id`` or ``parent_id`` (a mail of that thread) is
        given. ``InvalidArgument`` (nothing written) for an unknown or retired recipient, a
        retired sender, bad priority, a naive ``deadline_at``, JSON that jsonb cannot hold.
        ``NotFound`` for an unknown sender. With ``idempotency_key`` (unique per sender), the
        same request again returns the original mail and writes nothing, while a different
        request with a used key raises ``Conflict``.
        """
        return self._store._run(
            mail.send(
                sender,
                to,
                subject,
                body,
                thread_id,
                parent_id,
                priority,
                deadline_at,
                attachments,
                metadata,
                idempotency_key,
            )
        )

    def send_or_queue(
        self,
        outbox: Outbox,
        sender: str | Identity,
        to: Sequence[str | Identity] | str | Identity,
        subject: str,
        body: str,
        *,
        thread_id: str | None = None,
        parent_id: int | None = None,
        priority: str = "normal",
        deadline_at: datetime | None = None,
        attachments: Any = None,
        metadata: Any = None,
        idempotency_key: str | None = None,
    ) -> Mail | Queued:
        """``send``, or, when the database cannot be reached (``ConnectError``,
        ``ConnectionLost``), queue it in ``outbox`` and return ``Queued``; a later
        ``outbox.drain`` delivers it. See ``Outbox.submit``: mail already waiting in the
        outbox goes first, and the send always carries an idempotency key (a new UUIDv7
        unless given), so it is never delivered twice. Arguments are checked as by ``send``
        (``InvalidArgument``, nothing queued); ``OutboxFull`` when the outbox is full."""
        payload = {
            "sender": sender,
            "to": to,
            "subject": subject,
            "body": body,
            "thread_id": thread_id,
            "parent_id": parent_id,
            "priority": priority,
            "deadline_at": deadline_at,
            "attachments": attachments,
            "metadata": metadata,
        }
        result: Mail | Queued = outbox.submit(
            self._store, "send", payload, idempotency_key=idempotency_key
        )
        return result

    def reply(
        self,
        sender: str | Identity,
        mail_id: int,
        body: str,
        *,
        subject: str | None = None,
        priority: str = "normal",
        metadata: Any = None,
        idempotency_key: str | None = None,
    ) -> Mail:
        """Reply in the mail's thread (``parent_id=mail_id``) to every participant of the
        thread (senders and recipients) except the replier and retired identities.

        The subject defaults to ``Re: <subject>`` (never ``Re: Re:``). ``NotFound`` unless the
        sender sent or received ``mail_id``; ``InvalidArgument`` when no one is left to reply
        to. Idempotency keys as for ``send``.
        """
        return self._store._run(
            mail.reply(sender, mail_id, body, subject, priority, metadata, idempotency_key)
        )

    def inbox(
        self,
        identity: str | Identity,
        *,
        state: str | None = None,
        priority: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[InboxItem]:
        """An identity's mail, newest first: by default unread, read and starred (archived,
        trash and sleeping snoozes hidden); ``state`` picks one state (``"snoozed"``: the
        sleeping ones). Pass the last item's ``mail.id`` as ``before_id`` for the next page."""
        return self._store._run(mail.inbox(identity, state, priority, limit, before_id))

    def read(self, identity: str | Identity, mail_id: int) -> InboxItem:
        """Open a mail: unread becomes read (other states stay); ``read_at`` is set the first
        time. ``NotFound`` unless the identity received it."""
        return self._store._run(mail.read(identity, mail_id))

    def set_state(
        self,
        identity: str | Identity,
        mail_id: int,
        state: str,
        *,
        snoozed_until: datetime | timedelta | None = None,
    ) -> InboxItem:
        """Move the identity's copy of a mail to ``state`` along the allowed transitions
        (``mail.TRANSITIONS``); anything else, including staying in the same state (except
        re-snoozing), raises ``InvalidArgument`` naming both states and changes nothing.

        ``"snoozed"`` needs ``snoozed_until`` in the future: an aware datetime, or a timedelta
        from now. A snooze that has passed counts as unread everywhere.
        """
        return self._store._run(mail.set_state(identity, mail_id, state, snoozed_until))

    def ack(self, identity: str | Identity, mail_id: int) -> InboxItem:
        """Acknowledge a mail: ``acked_at`` is set once, an unread mail becomes read.
        Idempotent."""
        return self._store._run(mail.ack(identity, mail_id))

    def set_thread_state(self, identity: str | Identity, thread_id: str, state: str) -> int:
        """Apply a transition to each of the identity's mails in a thread where it is allowed,
        in one statement; return how many moved. (``"snoozed"`` is refused: snooze one mail.)"""
        return self._store._run(mail.set_thread_state(identity, thread_id, state))

    def thread(self, thread_id: str, *, identity: str | Identity | None = None) -> list[Mail]:
        """Every mail of a thread in id order (only those ``identity`` sent or received, when
        given); ``[]`` for an unknown thread."""
        return self._store._run(mail.thread(thread_id, identity))

    def sent(self, identity: str | Identity, *, limit: int = 50) -> list[Mail]:
        """What the identity sent, newest first (without those removed by ``delete_sent``)."""
        return self._store._run(mail.sent(identity, limit))

    def delete_sent(self, identity: str | Identity, mail_id: int) -> None:
        """Hide a sent mail from the sender's ``sent`` view only (recipients keep it)."""
        return self._store._run(mail.delete_sent(identity, mail_id))

    def counts(self, identity: str | Identity) -> MailCounts:
        """The identity's mailbox counts, in one query."""
        return self._store._run(mail.counts(identity))

    def search(
        self,
        query: str,
        *,
        identity: str | Identity | None = None,
        limit: int = 50,
        order: str = "rank",
        before: MailHit | None = None,
    ) -> list[MailHit]:
        """Full-text search of subjects (weighted higher) and bodies, in web-search syntax
        (quotes, ``or``, ``-term``); any text is accepted. With ``identity``: only mail it sent
        or received. Orders, the bounded candidates, exact-phrase matches first and ``before=``
        pages work as in ``Store.search``. ``limit`` is capped at ``MAX_SEARCH_LIMIT``."""
        return self._store._run(mail.search(query, identity, limit, order=order, before=before))

    def wait(self, identity: str | Identity, timeout: float) -> InboxItem | None:
        """The identity's oldest unread mail, marked read, waiting up to ``timeout`` seconds
        for one to arrive; None if none did.

        Wakes within milliseconds of the sending commit (LISTEN/NOTIFY on one extra connection
        per store, not a pooled one; no polling). Concurrent waiters never get the same mail.
        Inside ``store.transaction()`` the mail is marked read in that transaction.
        """
        seconds = mail.check_wait_timeout(timeout)
        deadline = time.monotonic() + seconds
        key = self._store._run(mail.wait_target(identity))
        name = identity_name(identity)
        listener = self._store._listener
        event = listener.register((MAIL, key)) if seconds > 0 else None
        try:
            while True:
                if event is not None:
                    event.clear()
                item, wake = self._store._run(mail.claim_next(name))
                remaining = deadline - time.monotonic()
                if item is not None or event is None or remaining <= 0:
                    return item
                pause = remaining if wake is None else min(remaining, wake + 0.001)
                event.wait(pause if listener.listening else min(pause, RETRY))
        finally:
            if event is not None:
                listener.unregister((MAIL, key), event)

    def publish(
        self,
        sender: str | Identity,
        topic: str | Topic,
        subject: str,
        body: str,
        *,
        priority: str = "normal",
        metadata: Any = None,
        attachments: Any = None,
        idempotency_key: str | None = None,
    ) -> Mail:
        """Append a mail to a topic at its next offset (``Mail.topic``, ``Mail.log_offset``).

        Offsets are gapless and commit in order. A broadcast topic gives every current
        subscriber but the sender an unread copy; a queue topic makes the mail claimable.
        ``NotFound`` for a missing topic or sender. Idempotency keys as for ``send`` (one key
        space per sender): a repeated publish returns the original and takes no offset.
        """
        return self._store._run(
            topics.publish(
                sender, topic, subject, body, priority, metadata, attachments, idempotency_key
            )
        )

    def wake_snoozed(self) -> int:
        """Turn every passed snooze into unread (they already count as unread); return how
        many."""
        return self._store._run(mail.wake_snoozed())

    def purge_trash(self, older_than: timedelta = timedelta(days=30)) -> int:
        """Delete recipient copies that have been in trash longer than ``older_than``; return
        how many."""
        return self._store._run(mail.purge_trash(older_than))


class TopicCalls:
    """``store.topics``: broadcast topics read by offset, and work queues (see
    ``ikigai_store.topics``). Topics and identities may be passed by name or as objects."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(
        self,
        name: str,
        kind: str = "broadcast",
        *,
        retention: timedelta = timedelta(days=7),
        max_attempts: int = 5,
    ) -> Topic:
        """Create a topic: ``"broadcast"`` (every subscriber reads every mail) or ``"queue"``
        (each mail is processed by one subscriber). ``InvalidArgument`` for a bad name or kind
        or a name already taken."""
        return self._store._run(topics.create(name, kind, retention, max_attempts))

    def get(self, name: str | Topic) -> Topic:
        """One topic; ``NotFound`` if there is none of that name."""
        return self._store._run(topics.get(name))

    def list(self) -> builtins.list[TopicInfo]:
        """Every topic with subscriber count, retained message count and last offset (one
        query), by name."""
        return self._store._run(topics.list_topics())

    def delete(self, name: str | Topic) -> None:
        """Delete a topic and its whole log (its mail leaves the inboxes too). Refused
        (``InvalidArgument``) while a queue topic has available or claimed messages."""
        return self._store._run(topics.delete(name))

    def subscribe(self, identity: str | Identity, topic: str | Topic) -> None:
        """Subscribe (idempotent). A missing topic is created as a broadcast topic. A new
        subscriber's offset is 0: it can read the topic's whole retained log."""
        return self._store._run(topics.subscribe(identity, topic))

    def unsubscribe(self, identity: str | Identity, topic: str | Topic) -> None:
        """Unsubscribe (idempotent); the stored offset is kept for a later re-subscribe."""
        return self._store._run(topics.unsubscribe(identity, topic))

    def subscribers(self, topic: str | Topic) -> builtins.list[Identity]:
        """The identities subscribed to a topic, by name."""
        return self._store._run(topics.subscribers(topic))

    def subscriptions(self, identity: str | Identity) -> builtins.list[Topic]:
        """The topics an identity is subscribed to, by name."""
        return self._store._run(topics.subscriptions(identity))

    def poll(self, identity: str | Identity, *, limit: int = 100) -> Poll:
        """In one round trip: the unread inbox (newest first) and, per subscribed broadcast
        topic, up to ``limit`` mails after the stored offset, with that offset. Reading does
        not move the offset: ``commit`` does."""
        return self._store._run(topics.poll(identity, limit))

    def read(self, topic: str | Topic, *, after: int = 0, limit: int = 100) -> builtins.list[Mail]:
        """A topic's log after offset ``after``, in offset order."""
        return self._store._run(topics.read(topic, after, limit))

    def commit(self, identity: str | Identity, topic: str | Topic, offset: int) -> int:
        """Store that ``identity`` has processed ``topic`` up to ``offset``; return the stored
        offset. Monotone: a smaller, late commit never moves it back. An offset past the
        topic's last is ``InvalidArgument``."""
        return self._store._run(topics.commit(identity, topic, offset))

    def offset(self, identity: str | Identity, topic: str | Topic) -> int:
        """The identity's stored offset of a topic (0 if it never committed)."""
        return self._store._run(topics.offset(identity, topic))

    def claim(
        self,
        identity: str | Identity,
        topic: str | Topic,
        *,
        lease: float = 30.0,
        wait: float = 0.0,
        complete: Claim | tuple[int, str] | None = None,
    ) -> Claim | None:
        """Claim the oldest available message of a queue topic the identity subscribes to,
        for ``lease`` seconds; wait up to ``wait`` seconds for one (woken by the publishing
        commit, or by a lease running out). None when there is none.

        A message whose lease expired is claimable again (its next attempt); one that used
        ``max_attempts`` becomes a dead letter. No message is held by two live leases.

        ``complete``: a claim (``Claim`` or ``(mail_id, token)``) to complete first, in the
        same statement, so a worker's loop (``held = claim(..., complete=held)``) is one round
        trip per message. If its lease was lost, ``InvalidArgument`` and nothing is claimed.
        """
        name, t, seconds, wait_s, done = topics.check_claim_args(
            identity, topic, lease, wait, complete
        )
        deadline = time.monotonic() + wait_s
        listener = self._store._listener
        key: tuple[str, int] | None = None
        event: threading.Event | None = None
        try:
            while True:
                if event is not None:
                    event.clear()
                held = self._store._run(topics.claim(name, t, seconds, done))
                done = None  # completed by the first attempt (which raised if it could not)
                if held is not None:
                    return held
                topic_id, expiry = self._store._run(topics.claim_state(name, t))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                if event is None:  # listen first, then look once more: no lost wake-up
                    key = (QUEUE, topic_id)
                    event = listener.register(key)
                    continue
                pause = remaining if expiry is None else min(remaining, expiry + 0.001)
                event.wait(pause if listener.listening else min(pause, RETRY))
        finally:
            if event is not None and key is not None:
                listener.unregister(key, event)

    def complete(self, claim: Claim | tuple[int, str]) -> None:
        """Finish a claimed message: it is never handed out again. ``InvalidArgument`` when
        the claim's lease was lost (completed, released or claimed again by someone else).

        ``claim`` is a ``Claim`` or a ``(mail_id, token)`` pair (e.g. handed to another
        process), here and in ``release`` and ``extend``."""
        return self._store._run(topics.complete(claim))

    def release(self, claim: Claim | tuple[int, str], error: str | None = None) -> str:
        """Give a claimed message back (with the reason in ``error``): it becomes claimable
        again, or a dead letter when it used its last attempt; return which (``"available"``
        or ``"dead"``). ``InvalidArgument`` when the lease was lost."""
        return self._store._run(topics.release(claim, error))

    def extend(self, claim: Claim | tuple[int, str], lease: float) -> Claim:
        """Renew a claim's lease to ``lease`` seconds from now; return the updated claim.
        ``InvalidArgument`` when the lease was lost."""
        return self._store._run(topics.extend(claim, lease))

    def dead_letters(self, topic: str | Topic) -> builtins.list[DeadLetter]:
        """A queue topic's dead letters, oldest first, with attempts and last error."""
        return self._store._run(topics.dead_letters(topic))

    def requeue(self, mail_id: int) -> None:
        """Make a dead letter claimable again (its attempts start over)."""
        return self._store._run(topics.requeue(mail_id))

    def apply_retention(self) -> dict[str, int]:
        """Delete topic mail older than its topic's retention and return ``{topic: deleted}``.

        Kept regardless of age: queue messages not completed (available, claimed, dead) and
        broadcast mail that a subscriber has not passed by its stored offset. Direct mail is
        never removed by retention.
        """
        return self._store._run(topics.apply_retention())


class TaskCalls:
    """``store.tasks``: task lists, tasks with dependencies, claims and releases, counts,
    syncing and pruning (see ``ikigai_store.tasks``). A list may be passed by its ``list_id``
    or as a ``TaskList``; a task is named by its list and its ``external_id`` there."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create_list(
        self, list_id: str, owner: str | Identity, *, watch_path: str | None = None
    ) -> TaskList:
        """Create a list owned by an identity. The same request again returns the existing list
        (a retry is harmless); ``list_id`` taken with another owner or watch_path is
        ``Conflict``; a missing owner ``NotFound``, a retired one ``InvalidArgument``."""
        return self._store._run(tasks.create_list(list_id, owner, watch_path))

    def get_list(self, list_id: str | TaskList) -> TaskList:
        """One list; ``NotFound`` if there is none with that id."""
        return self._store._run(tasks.get_list(list_id))

    def lists(self) -> builtins.list[TaskList]:
        """Every list, oldest first."""
        return self._store._run(tasks.lists())

    def upsert_task(
        self,
        list_id: str | TaskList,
        external_id: str,
        *,
        subject: str | None = None,
        description: str | None = None,
        active_form: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        status: str | None = None,
        owner: str | Identity | None = None,
        blocked_by: Sequence[str] | None = None,
    ) -> Task:
        """Create or update task ``external_id`` of a list and return it (completion is
        ``status="completed"``).

        Merge rules (an upsert never erases): None or ``""`` leaves a text field, the status or
        the owner as stored; ``metadata`` (a dict) is merged into the stored object, its
        top-level keys winning; ``started_at`` / ``completed_at`` are set the first time the
        task becomes in_progress / completed and never change after. A new task needs a
        ``subject``. ``blocked_by`` (external ids of tasks of the same list) replaces the
        task's dependencies: ``[]`` clears them, None leaves them.

        The task's first completion (the upsert that sets ``completed_at``) writes a
        ``task_complete`` activity in the same statement when its owner, after the merge, is
        the name of an identity that is not retired (``store.activities.feed``); a free-text
        owner writes none, and neither does completing an already completed or a reopened
        task again.

        Refused, writing nothing: bad arguments, a new task without a subject, a dependency on
        itself or one that would close a cycle (``InvalidArgument`` naming the cycle's path);
        a missing list or a blocker that names no task of the list (``NotFound``).
        """
        return self._store._run(
            tasks.upsert_task(
                list_id,
                external_id,
                subject,
                description,
                active_form,
                metadata,
                status,
                owner,
                blocked_by,
            )
        )

    def get_task(self, list_id: str | TaskList, external_id: str) -> Task:
        """One task; ``NotFound`` when the list or the task does not exist."""
        return self._store._run(tasks.get_task(list_id, external_id))

    def tasks(self, list_id: str | TaskList, status: str | None = None) -> builtins.list[Task]:
        """A list's tasks in creation (id) order, all of them or those with ``status``."""
        return self._store._run(tasks.tasks(list_id, status))

    def available_tasks(self, list_id: str | TaskList | None = None) -> builtins.list[Task]:
        """The tasks anyone may claim now, in id order: pending, unowned, and each blocker
        completed or deleted. ``list_id`` None: over every list."""
        return self._store._run(tasks.available_tasks(list_id))

    def claim_task(self, list_id: str | TaskList, external_id: str, owner: str | Identity) -> Task:
        """Make a task in_progress with ``owner``, in one guarded statement: only when it is
        pending, unowned (or assigned to ``owner``) and nothing blocks it. Of racing claimers
        exactly one wins; claiming a task one already holds returns it unchanged.

        Refusals: another owner holds it (``Conflict`` naming the owner); it is completed,
        deleted, in_progress without an owner, or blocked (``InvalidArgument`` saying which,
        and by what); the list or the task does not exist (``NotFound``).
        """
        return self._store._run(tasks.claim_task(list_id, external_id, owner))

    def release_task(
        self, list_id: str | TaskList, external_id: str, owner: str | Identity
    ) -> Task:
        """Give back an in_progress task held by ``owner`` (e.g. for an agent that died), in
        one guarded statement: it becomes pending and unowned, available again once nothing
        blocks it; ``started_at`` keeps the first start.

        Refusals: another owner holds it (``Conflict`` naming the holder); it is not in
        progress, or in progress without an owner (``InvalidArgument``); the list or the task
        does not exist (``NotFound``). Releasing twice is refused the second time (the task is
        pending by then).
        """
        return self._store._run(tasks.release_task(list_id, external_id, owner))

    def task_stats(self, list_id: str | TaskList | None = None) -> TaskStats:
        """Counts per status, available and blocked, in one query (``list_id`` None: every
        list)."""
        return self._store._run(tasks.task_stats(list_id))

    def sync_list(self, list_id: str | TaskList, active_external_ids: Iterable[str]) -> int:
        """Mirror the source of a list: every task not named in ``active_external_ids`` (and
        not deleted yet) becomes deleted, and ``last_synced_at`` is set; return how many were
        deleted. Names of tasks that do not exist are ignored."""
        return self._store._run(tasks.sync_list(list_id, active_external_ids))

    def prune(self, older_than: timedelta) -> int:
        """Delete the completed and deleted tasks (of every list) last updated more than
        ``older_than`` ago, with their dependency edges; return how many. A pruned blocker
        blocks nothing, as it did not while completed or deleted."""
        return self._store._run(tasks.prune(older_than))


class ActivityCalls:
    """``store.activities``: the activity feed (see ``ikigai_store.activities``).

    Wherever an identity is expected, its name or an ``Identity`` is accepted.
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def record_activity(
        self,
        identity: str | Identity,
        type: str,
        description: str,
        metadata: dict[str, Any] | None = None,
    ) -> Activity:
        """Record what ``identity`` did: ``type`` is one of ``ACTIVITY_TYPES`` (else
        ``InvalidArgument`` listing them), ``description`` 1-10,000 characters, ``metadata`` a
        JSON object or None. ``NotFound`` for an unknown identity, ``InvalidArgument`` for a
        retired one."""
        return self._store._run(activities.record(identity, type, description, metadata))

    def feed(
        self,
        since: datetime | None = None,
        identity: str | Identity | None = None,
        type: str | None = None,
        limit: int = 50,
        before: Activity | int | None = None,
    ) -> builtins.list[Activity]:
        """Activities newest first (by id), at most ``limit``: of one identity and/or one type,
        created at or after ``since`` (a timezone-aware datetime). For the next page pass the
        last activity of this one as ``before`` (keyset pagination: nothing is repeated or
        skipped). ``NotFound`` when ``identity`` does not exist."""
        return self._store._run(activities.feed(since, identity, type, limit, before))

    def prune_activities(self, older_than: timedelta) -> int:
        """Delete activities created more than ``older_than`` ago; return how many."""
        return self._store._run(activities.prune(older_than))


class SummaryCalls:
    """``store.summaries``: summaries of identities' work and runtime agents' context
    summaries (see ``ikigai_store.summaries``)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add_summary(
        self,
        identity: str | Identity,
        summary: str,
        *,
        delta: str | None = None,
        transcript_hash: str | None = None,
        cost_usd: float | None = None,
    ) -> AgentSummary:
        """Store a summary of ``identity``'s work, with what changed since the last one
        (``delta``), the hash of the transcript it summarises and what it cost (>= 0).
        ``NotFound`` for an unknown identity, ``InvalidArgument`` for a retired one."""
        return self._store._run(summaries.add(identity, summary, delta, transcript_hash, cost_usd))

    def latest_summary(self, identity: str | Identity) -> AgentSummary | None:
        """The identity's newest summary, or None when it has none."""
        return self._store._run(summaries.latest(identity))

    def summary_history(
        self, identity: str | Identity, limit: int = 10
    ) -> builtins.list[AgentSummary]:
        """The identity's summaries, newest first, at most ``limit``."""
        return self._store._run(summaries.history(identity, limit))

    def prune_summaries(self, identity: str | Identity | None = None, keep: int = 5) -> int:
        """Keep the newest ``keep`` summaries of each identity (of ``identity`` only, when
        given), delete the rest in one statement; return how many were deleted."""
        return self._store._run(summaries.prune(identity, keep))

    def add_context_summary(
        self,
        agent_uuid: str,
        summary: str,
        start_msg_id: int,
        end_msg_id: int,
        token_count: int,
    ) -> ContextSummary:
        """Store a runtime agent's summary of its messages ``start_msg_id``..``end_msg_id``
        (both included); only the agent's newest 5 are kept (in the same transaction).

        Both ends must be messages of the agent's replayable history (``replay_ranges``: its
        own events and its ancestors' up to each fork point, after the newest clear), and
        start <= end: else ``InvalidArgument``. ``NotFound`` for an unknown agent. The same
        range again returns the stored summary when summary and token count are equal, and
        raises ``Conflict`` when they differ.
        """
        return self._store._run(
            summaries.add_context(agent_uuid, summary, start_msg_id, end_msg_id, token_count)
        )

    def context_summaries(self, agent_uuid: str) -> builtins.list[ContextSummary]:
        """A runtime agent's context summaries, newest first (at most 5)."""
        return self._store._run(summaries.context_summaries(agent_uuid))


class LeaseCalls:
    """``store.leases``: resources reserved by identities, enforced by the database (see
    ``ikigai_store.leases``). A holder is an identity's name or an ``Identity``; a lease is a
    ``Lease`` or a ``(resource, token)`` pair."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def acquire(
        self,
        holder: str | Identity,
        resource: str,
        *,
        ttl: timedelta | float,
        exclusive: bool = True,
    ) -> Lease:
        """Lease ``resource`` (1-512 characters) to ``holder`` for ``ttl`` (a timedelta or
        seconds, at most one day) from now, by the database's clock.

        An exclusive lease is refused while another holder has a live lease on the resource;
        a shared one (``exclusive=False``) only while another holder has a live exclusive one.
        Refused: ``Conflict`` naming the holder(s) and when the lease ends. A holder acquiring a
        resource it holds replaces its lease (new token, mode and expiry). An expired lease
        frees the resource by itself. ``NotFound`` for an unknown holder, ``InvalidArgument``
        for a retired one.
        """
        return self._store._run(leases.acquire(holder, resource, ttl, exclusive))

    def renew(self, lease: Lease | tuple[str, str], ttl: timedelta | float) -> Lease:
        """Make a live lease end ``ttl`` from now; return it. ``NotFound`` when it is no
        longer live (expired, released, force-released or replaced): acquire it again."""
        return self._store._run(leases.renew(lease, ttl))

    def release(self, lease: Lease | tuple[str, str]) -> bool:
        """End a lease: True when it was live, False when it had already ended (idempotent:
        its token no longer holds anything either way)."""
        return self._store._run(leases.release(lease))

    def force_release(self, resource: str) -> int:
        """End every lease on ``resource``, whoever holds it (for administrators); return how
        many were live."""
        return self._store._run(leases.force_release(resource))

    def held(
        self, prefix: str = "", *, holder: str | Identity | None = None
    ) -> builtins.list[Lease]:
        """Live leases whose resource starts with ``prefix`` (literally: no wildcards), of one
        holder when given, by resource. ``NotFound`` for an unknown holder."""
        return self._store._run(leases.held(prefix, holder))


class ReviewCalls:
    """``store.reviews``: code reviews on the seed's state machine, guarded in SQL (see
    ``ikigai_store.reviews``). A review is named by its ``review_id`` (UUID text, a
    ``uuid.UUID`` or the ``Review``), an identity by its name or the ``Identity``.

    Events and who acts (``by``; the default in brackets): ``submit`` new -> pending_review
    [requester, mails the reviewers]; ``start`` pending_review or re_review -> under_review
    [first reviewer, no mail]; ``approve``, ``request_changes``, ``reject`` under_review ->
    approved, changes_requested, rejected [first reviewer, mails the requester]; ``resubmit``
    changes_requested -> re_review [requester, mails the reviewers]; ``cancel`` any
    non-terminal state -> cancelled [requester, mails the other participants]. Each change,
    its mail (on the review's thread) and its activity are one statement; an illegal event is
    ``InvalidArgument`` naming the state and the event, and writes nothing.
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(
        self,
        requester: str | Identity,
        *,
        reviewers: str | Identity | Sequence[str | Identity],
        branch: str | None = None,
        base_branch: str = "main",
        commit_sha: str | None = None,
        repo_path: str | None = None,
        remote_url: str | None = None,
        pr_number: int | None = None,
        review_type: str = "full",
        priority: str = "normal",
    ) -> Review:
        """Create a review in state ``new`` (nobody is mailed until ``submit``). The requester
        and every reviewer (at least one, at most 100; duplicates count once, order kept) must
        exist (``NotFound``) and not be retired (``InvalidArgument``). ``review_type``: full,
        incremental, security, performance or architecture; ``priority``: urgent, normal or
        low (also its mails' priority)."""
        return self._store._run(
            reviews.create(
                requester,
                reviewers,
                branch,
                base_branch,
                commit_sha,
                repo_path,
                remote_url,
                pr_number,
                review_type,
                priority,
            )
        )

    def get(self, review_id: str | UUID | Review) -> Review:
        """One review; ``NotFound`` if there is none with that id."""
        return self._store._run(reviews.get(review_id))

    def list(
        self,
        *,
        state: str | None = None,
        requester: str | Identity | None = None,
        limit: int = 50,
        before_id: int | Review | None = None,
    ) -> builtins.list[Review]:
        """Reviews, newest first, optionally in one ``state`` and/or of one ``requester``
        (``NotFound`` if that identity does not exist); page with
        ``before_id=page[-1]`` (the last review, or its ``id``)."""
        return self._store._run(reviews.list_reviews(state, requester, limit, before_id))

    def active_reviews(self) -> builtins.list[Review]:
        """Every review not approved, rejected or cancelled, oldest first (restart recovery)."""
        return self._store._run(reviews.active())

    def resolve_prefix(self, prefix: str) -> Review:
        """The review whose id starts with ``prefix`` (4 to 32 hex digits, hyphens ignored;
        8 always suffice: the first 8 are unique). ``NotFound`` when none does,
        ``InvalidArgument`` naming the count when several do or the prefix is malformed."""
        return self._store._run(reviews.resolve_prefix(prefix))

    def fire(
        self, review_id: str | UUID | Review, event: str, *, by: str | Identity | None = None
    ) -> Review:
        """Apply ``event`` (submit, start, approve, request_changes, reject, resubmit, cancel)
        and return the review as changed. ``by`` names the actor, who sends the event's mail
        and owns its activity (default: the requester for submit, resubmit and cancel, the
        first reviewer otherwise); it must exist and not be retired. An event the current
        state does not allow is ``InvalidArgument`` ("review 1a2b3c4d is approved (terminal);
        cannot start"); an unknown review ``NotFound``; either way nothing is written."""
        return self._store._run(reviews.fire(review_id, event, by))

    def submit(self, review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Review:
        """``fire(review_id, "submit")``: new -> pending_review; mails the reviewers."""
        return self._store._run(reviews.fire(review_id, "submit", by))

    def start(self, review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Review:
        """``fire(review_id, "start")``: pending_review or re_review -> under_review."""
        return self._store._run(reviews.fire(review_id, "start", by))

    def approve(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        """``fire(review_id, "approve")``: under_review -> approved; mails the requester."""
        return self._store._run(reviews.fire(review_id, "approve", by))

    def request_changes(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        """``fire(review_id, "request_changes")``: under_review -> changes_requested; mails
        the requester."""
        return self._store._run(reviews.fire(review_id, "request_changes", by))

    def reject(self, review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Review:
        """``fire(review_id, "reject")``: under_review -> rejected; mails the requester."""
        return self._store._run(reviews.fire(review_id, "reject", by))

    def resubmit(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        """``fire(review_id, "resubmit")``: changes_requested -> re_review; mails the
        reviewers."""
        return self._store._run(reviews.fire(review_id, "resubmit", by))

    def cancel(self, review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Review:
        """``fire(review_id, "cancel")``: any non-terminal state -> cancelled; mails the
        requester and (unless it was still new) the reviewers, except the actor."""
        return self._store._run(reviews.fire(review_id, "cancel", by))

    def record_iteration(
        self,
        review_id: str | UUID | Review,
        reviewer: str | Identity,
        decision: str,
        summary: str,
        *,
        issues: Sequence[Mapping[str, Any]] = (),
        suggestions: Any = None,
        files_reviewed: int | None = None,
        lines_analyzed: int | None = None,
        duration_ms: int | None = None,
        cost_usd: float | None = None,
        reviewer_session_id: str | None = None,
    ) -> ReviewIteration:
        """Record one review round by ``reviewer`` while the review is under_review, numbered
        1, 2, 3... without gaps even when recorded concurrently, with its ``issues`` (dicts
        with ``issue_type``, ``severity``, ``title``, ``description`` and optionally
        ``file_path``, ``line_start``, ``line_end``, ``code_snippet``, ``suggestion``,
        ``claude_md_ref``; anything else is ``InvalidArgument``). ``decision`` approve,
        request_changes or reject applies that event in the same statement; ``comment``
        changes no state. The requester is mailed the summary and the issues on the review's
        thread, with an activity. Outside under_review: ``InvalidArgument``, nothing written
        (the iteration included)."""
        return self._store._run(
            reviews.record_iteration(
                review_id,
                reviewer,
                decision,
                summary,
                issues,
                suggestions,
                files_reviewed,
                lines_analyzed,
                duration_ms,
                cost_usd,
                reviewer_session_id,
            )
        )

    def iterations(self, review_id: str | UUID | Review) -> builtins.list[ReviewIteration]:
        """A review's iterations in order, each with its issues."""
        return self._store._run(reviews.iterations(review_id))

    def issues(self, review_id: str | UUID | Review) -> builtins.list[ReviewIssue]:
        """Every issue of a review (open or resolved), in the order they were raised."""
        return self._store._run(reviews.issues(review_id))

    def open_issues(self, review_id: str | UUID | Review) -> builtins.list[ReviewIssue]:
        """A review's open issues, most severe first (critical, high, medium, low), then in
        the order they were raised."""
        return self._store._run(reviews.open_issues(review_id))

    def resolve_issue(
        self, issue_id: int | ReviewIssue, status: str, iteration: int | None = None
    ) -> ReviewIssue:
        """Resolve an open issue as ``fixed``, ``wont_fix`` or ``duplicate`` in ``iteration``
        of its review (default: the latest; not one before the issue's own). A resolved issue
        is not reopened (``InvalidArgument``): raise a new issue in a new iteration."""
        return self._store._run(reviews.resolve_issue(issue_id, status, iteration))


class PlanCalls:
    """``store.plans``: plans approved before they are carried out (see
    ``ikigai_store.plans``). pending -> approved | rejected | changes_requested;
    changes_requested -> pending by ``resubmit_plan``. Each change, its mail (on the plan's
    thread) and its activity are one statement; a refused change writes nothing."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def submit_plan(
        self,
        requester: str | Identity,
        plan_path: str,
        title: str,
        summary: str,
        *,
        reviewer: str | Identity = "User",
        session_key: str | None = None,
    ) -> PlanReview:
        """Submit a plan for review (state pending): mails the reviewer on the plan's new
        thread and records ``plan_submitted``. The default reviewer ``"User"`` (the human) is
        registered as an identity on first use; any other reviewer must exist (``NotFound``).
        ``session_key`` ties it to an external session (see ``pending_for_session``)."""
        return self._store._run(
            plans.submit(requester, plan_path, title, summary, reviewer, session_key)
        )

    def decide(
        self,
        plan_review_id: str | UUID | PlanReview,
        state: str,
        comment: str | None = None,
        reviewed_by: str | Identity | None = None,
    ) -> PlanReview:
        """Decide a pending plan: ``approved``, ``rejected`` or ``changes_requested``, by
        ``reviewed_by`` (default: the plan's reviewer); mails the requester (with the
        comment) and records ``plan_decided``. A plan that is not pending (decided already,
        or waiting for its resubmission) is ``InvalidArgument``, nothing written."""
        return self._store._run(plans.decide(plan_review_id, state, comment, reviewed_by))

    def resubmit_plan(
        self,
        plan_review_id: str | UUID | PlanReview,
        *,
        summary: str | None = None,
        plan_path: str | None = None,
    ) -> PlanReview:
        """Resubmit a plan whose changes were requested: pending again, ``revision + 1``, the
        new summary and path when given, the decision cleared; mails the reviewer and records
        ``plan_submitted``. From any other state: ``InvalidArgument``, nothing written."""
        return self._store._run(plans.resubmit(plan_review_id, summary, plan_path))

    def get(self, plan_review_id: str | UUID | PlanReview) -> PlanReview:
        """One plan review; ``NotFound`` if there is none with that id."""
        return self._store._run(plans.get(plan_review_id))

    def by_thread(self, thread_id: str) -> PlanReview:
        """The plan review whose mail thread is ``thread_id`` (``NotFound`` if none)."""
        return self._store._run(plans.by_thread(thread_id))

    def pending_for_session(self, session_key: str) -> builtins.list[PlanReview]:
        """The session's plan reviews waiting for a decision (state pending), oldest first."""
        return self._store._run(plans.pending_for_session(session_key))

    def list(
        self,
        *,
        state: str | None = None,
        requester: str | Identity | None = None,
        limit: int = 50,
        before_id: int | PlanReview | None = None,
    ) -> builtins.list[PlanReview]:
        """Plan reviews, newest first, optionally in one ``state`` and/or of one
        ``requester``; page with ``before_id=page[-1]`` (or its ``id``)."""
        return self._store._run(plans.list_plans(state, requester, limit, before_id))
