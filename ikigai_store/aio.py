"""The asyncio face: ``AsyncStore`` and ``open_async``, the same operations as ``Store``.

Owns the asyncio-facing API: an ``AsyncPool``, transactions and one thin coroutine per
operation. Every operation is the very generator ``Store`` runs (see ``ops``), driven by
``ops.arun`` on the same SQL, so the two faces cannot drift; a test checks that every public
``Store`` method has a twin here with the same signature, and the integration tests run against
both. Invariants: as for ``Store``; the connection of ``store.transaction()`` is pinned in a
``ContextVar``, so it belongs to the task that opened the block (and the tasks it creates inside
it); blocking work (starting the embedded server, migrations) runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
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
from .agents import UNSET, Unset
from .config import redact, resolve_url
from .errors import ConnectionLost, IkigaiStoreError, translate
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
from .notify import MAIL, QUEUE, RETRY, AsyncListener
from .outbox import Outbox
from .pool import AConn, AsyncPool
from .store import (
    ActivityCalls,
    IdentityCalls,
    LeaseCalls,
    MailCalls,
    PlanCalls,
    ReviewCalls,
    Store,
    SummaryCalls,
    TaskCalls,
    TopicCalls,
    check_pool_options,
    resolve_target,
)
from .validate import check_seconds

__all__ = [
    "AsyncActivityCalls",
    "AsyncIdentityCalls",
    "AsyncLeaseCalls",
    "AsyncMailCalls",
    "AsyncPlanCalls",
    "AsyncReviewCalls",
    "AsyncStore",
    "AsyncSummaryCalls",
    "AsyncTaskCalls",
    "AsyncTopicCalls",
    "open_async",
]

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
            from .embedded import install_exit_hooks

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


class AsyncStore:
    """``Store`` for asyncio: the same methods as coroutines (create with ``open_async`` or
    ``await AsyncStore.connect(url)``); safe to share between tasks."""

    def __init__(self, url: str, pool: AsyncPool) -> None:
        self._conninfo = url
        self._pool = pool
        #: Data directory of the embedded server this store runs on (None for other servers).
        self.embedded_data_dir: Path | None = None
        self._pinned: ContextVar[AConn | None] = ContextVar(
            f"ikigai_async_store_{id(self)}", default=None
        )
        self._listener = AsyncListener(pool.probe)
        #: Identities: named participants of mail (``AsyncIdentityCalls``).
        self.identities = AsyncIdentityCalls(self)
        #: Direct mail between identities, and publishing to topics (``AsyncMailCalls``).
        self.mail = AsyncMailCalls(self)
        #: Topics, subscriptions, offsets and work queues (``AsyncTopicCalls``).
        self.topics = AsyncTopicCalls(self)
        #: Task lists, tasks with dependencies, claims (``AsyncTaskCalls``).
        self.tasks = AsyncTaskCalls(self)
        #: The activity feed (``AsyncActivityCalls``).
        self.activities = AsyncActivityCalls(self)
        #: Agent summaries and runtime context summaries (``AsyncSummaryCalls``).
        self.summaries = AsyncSummaryCalls(self)
        #: Leases on resources, enforced by the database (``AsyncLeaseCalls``).
        self.leases = AsyncLeaseCalls(self)
        #: Code reviews: the review state machine, iterations and issues (``AsyncReviewCalls``).
        self.reviews = AsyncReviewCalls(self)
        #: Plan reviews: plans approved before they are carried out (``AsyncPlanCalls``).
        self.plans = AsyncPlanCalls(self)

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
        return await ops.arun(lambda: self._scope(atomic), op, self._on_error)

    @asynccontextmanager
    async def _scope(self, atomic: bool) -> AsyncIterator[AConn]:
        pinned = self._pinned.get()
        if pinned is not None:
            async with pinned.transaction():
                yield pinned
            return
        async with self._pool.connection() as conn:
            if atomic:
                async with conn.transaction():
                    yield conn
            else:
                yield conn

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AConn]:
        """Internal: a connection for raw SQL (see ``Store._connection``)."""
        async with self._scope(False) as conn:
            try:
                yield conn
            except psycopg.Error as exc:
                raise self._on_error(exc, conn) from exc

    def _on_error(self, exc: psycopg.Error, conn: Any) -> IkigaiStoreError:
        error = translate(exc, conn)
        if isinstance(error, ConnectionLost):
            self._pool.mark_suspect()
        return error

    @asynccontextmanager
    async def transaction(self, *, force_rollback: bool = False) -> AsyncIterator[AsyncStore]:
        """``async with store.transaction():`` groups the calls made inside the block (in this
        task) into one transaction; see ``Store.transaction``."""
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
                finally:
                    self._pinned.reset(token)
        except psycopg.Error as exc:
            raise self._on_error(exc, pinned) from exc

    # ---------------------------------------------------------------- schema

    async def migrate(
        self, progress: Callable[[str], None] | None = None, *, lock_timeout: float = 60.0
    ) -> list[str]:
        """See ``Store.migrate`` (runs in a worker thread; ``progress`` is called there)."""
        check_seconds(lock_timeout, "lock_timeout")
        return await asyncio.to_thread(
            _migrate.apply, self._conninfo, progress=progress, lock_timeout=lock_timeout
        )

    async def pending_migrations(self) -> list[str]:
        """See ``Store.pending_migrations``."""
        return await asyncio.to_thread(_migrate.pending, self._conninfo)

    # ---------------------------------------------------------------- operations
    # One line each; the docstrings are Store's (copied below the class).

    async def schema_version(self) -> int:
        return await self._run(admin.schema_version())

    async def create_session(self, title: str | None = None) -> int:
        return await self._run(sessions.create_session(title))

    async def get_active_session(self) -> int | None:
        return await self._run(sessions.get_active_session())

    async def end_session(self, session_id: int) -> None:
        return await self._run(sessions.end_session(session_id))

    async def get_session(self, session_id: int) -> Session:
        return await self._run(sessions.get_session(session_id))

    async def list_sessions(self, limit: int = 50) -> list[Session]:
        return await self._run(sessions.list_sessions(limit))

    async def set_session_title(self, session_id: int, title: str | None) -> None:
        return await self._run(sessions.set_session_title(session_id, title))

    async def append(
        self,
        session_id: int,
        kind: str,
        content: str | None = None,
        data: Any = None,
        *,
        agent_uuid: str | None = None,
    ) -> Message:
        return await self._run(events.append(session_id, kind, content, data, agent_uuid))

    async def messages(self, session_id: int) -> list[Message]:
        return await self._run(events.messages(session_id))

    async def count_messages(self, session_id: int) -> int:
        return await self._run(events.count_messages(session_id))

    async def replay_session(self, session_id: int) -> ReplayContext:
        return await self._run(events.replay_session(session_id))

    async def create_agent(
        self,
        session_id: int,
        *,
        name: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        thinking_level: str | None = None,
    ) -> Agent:
        return await self._run(
            agents.create_agent(session_id, name, provider, model, thinking_level)
        )

    async def fork_agent(
        self,
        parent_uuid: str,
        *,
        name: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        thinking_level: str | None = None,
    ) -> Agent:
        return await self._run(
            agents.fork_agent(parent_uuid, name, provider, model, thinking_level)
        )

    async def get_agent(self, uuid: str) -> Agent:
        return await self._run(agents.get_agent(uuid))

    async def kill_agent(self, uuid: str) -> list[str]:
        return await self._run(agents.kill_agent(uuid))

    async def reap_agent(self, uuid: str) -> None:
        return await self._run(agents.reap_agent(uuid))

    async def set_agent_idle(self, uuid: str, idle: bool) -> None:
        return await self._run(agents.set_agent_idle(uuid, idle))

    async def update_agent_model(
        self,
        uuid: str,
        *,
        provider: str | Unset | None = UNSET,
        model: str | Unset | None = UNSET,
        thinking_level: str | Unset | None = UNSET,
    ) -> Agent:
        return await self._run(agents.update_agent_model(uuid, provider, model, thinking_level))

    async def running_agents(self, session_id: int | None = None) -> list[Agent]:
        return await self._run(agents.running_agents(session_id))

    async def children(self, uuid: str) -> list[Agent]:
        return await self._run(agents.children(uuid))

    async def ensure_root_agent(self, session_id: int, **fields: str | None) -> Agent:
        return await self._run(agents.ensure_root_agent(session_id, fields))

    async def find_clear(self, agent_uuid: str, max_id: int | None = None) -> int:
        return await self._run(agents.find_clear(agent_uuid, max_id))

    async def replay_ranges(self, agent_uuid: str) -> list[ReplayRange]:
        return await self._run(agents.replay_ranges(agent_uuid))

    async def query_range(self, replay_range: ReplayRange) -> list[Message]:
        return await self._run(agents.query_range(replay_range))

    async def replay_agent(self, agent_uuid: str) -> ReplayContext:
        return await self._run(agents.replay_agent(agent_uuid))

    async def mark(self, agent_uuid: str, label: str | None = None) -> Message:
        return await self._run(agents.mark(agent_uuid, label))

    async def rewind(self, agent_uuid: str, label: str | None = None) -> Message:
        return await self._run(agents.rewind(agent_uuid, label))

    async def clear(self, agent_uuid: str) -> Message:
        return await self._run(agents.clear(agent_uuid))

    async def search(
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
        return await self._run(
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

    async def search_terms(self, query: str) -> str:
        return await self._run(search.search_terms(query))

    async def truncate_all(self) -> None:
        return await self._run(admin.truncate_all())


class AsyncIdentityCalls:
    """``IdentityCalls`` for ``AsyncStore`` (``store.identities``): the same calls, awaited.

    Wherever an identity is expected, its name or an ``Identity`` is accepted.
    """

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def register(
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
        return await self._store._run(
            identities.register(
                name, project_key, git_branch, purpose, working_dir, hostname, agent_uuid
            )
        )

    async def get(self, name: str | Identity) -> Identity:
        return await self._store._run(identities.get(name))

    async def list(
        self, *, project_key: str | None = None, include_retired: bool = False
    ) -> list[Identity]:
        return await self._store._run(identities.list_identities(project_key, include_retired))

    async def for_session(
        self, session_key: str, *, project_key: str | None = None, git_branch: str | None = None
    ) -> Identity:
        return await self._store._run(identities.for_session(session_key, project_key, git_branch))

    async def for_agent(self, agent_uuid: str) -> Identity:
        return await self._store._run(identities.for_agent(agent_uuid))

    async def heartbeat(self, name: str | Identity) -> Identity:
        return await self._store._run(identities.heartbeat(name))

    async def retire(self, name: str | Identity) -> Identity:
        return await self._store._run(identities.retire(name))

    async def discover(self, *, project_key: str | None = None) -> builtins.list[IdentityStatus]:
        return await self._store._run(identities.discover(project_key))


class AsyncMailCalls:
    """``MailCalls`` for ``AsyncStore`` (``store.mail``): the same calls, awaited.

    Wherever an identity is expected, its name or an ``Identity`` is accepted.
    """

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def send(
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
        return await self._store._run(
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

    async def send_or_queue(
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
        result: Mail | Queued = await outbox.asubmit(
            self._store, "send", payload, idempotency_key=idempotency_key
        )
        return result

    async def reply(
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
        return await self._store._run(
            mail.reply(sender, mail_id, body, subject, priority, metadata, idempotency_key)
        )

    async def inbox(
        self,
        identity: str | Identity,
        *,
        state: str | None = None,
        priority: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[InboxItem]:
        return await self._store._run(mail.inbox(identity, state, priority, limit, before_id))

    async def read(self, identity: str | Identity, mail_id: int) -> InboxItem:
        return await self._store._run(mail.read(identity, mail_id))

    async def set_state(
        self,
        identity: str | Identity,
        mail_id: int,
        state: str,
        *,
        snoozed_until: datetime | timedelta | None = None,
    ) -> InboxItem:
        return await self._store._run(mail.set_state(identity, mail_id, state, snoozed_until))

    async def ack(self, identity: str | Identity, mail_id: int) -> InboxItem:
        return await self._store._run(mail.ack(identity, mail_id))

    async def set_thread_state(self, identity: str | Identity, thread_id: str, state: str) -> int:
        return await self._store._run(mail.set_thread_state(identity, thread_id, state))

    async def thread(self, thread_id: str, *, identity: str | Identity | None = None) -> list[Mail]:
        return await self._store._run(mail.thread(thread_id, identity))

    async def sent(self, identity: str | Identity, *, limit: int = 50) -> list[Mail]:
        return await self._store._run(mail.sent(identity, limit))

    async def delete_sent(self, identity: str | Identity, mail_id: int) -> None:
        return await self._store._run(mail.delete_sent(identity, mail_id))

    async def counts(self, identity: str | Identity) -> MailCounts:
        return await self._store._run(mail.counts(identity))

    async def search(
        self,
        query: str,
        *,
        identity: str | Identity | None = None,
        limit: int = 50,
        order: str = "rank",
        before: MailHit | None = None,
    ) -> list[MailHit]:
        return await self._store._run(
            mail.search(query, identity, limit, order=order, before=before)
        )

    async def wait(self, identity: str | Identity, timeout: float) -> InboxItem | None:
        seconds = mail.check_wait_timeout(timeout)
        deadline = time.monotonic() + seconds
        key = await self._store._run(mail.wait_target(identity))
        name = identity_name(identity)
        listener = self._store._listener
        event = listener.register((MAIL, key)) if seconds > 0 else None
        try:
            while True:
                if event is not None:
                    event.clear()
                item, wake = await self._store._run(mail.claim_next(name))
                remaining = deadline - time.monotonic()
                if item is not None or event is None or remaining <= 0:
                    return item
                pause = remaining if wake is None else min(remaining, wake + 0.001)
                pause = pause if listener.listening else min(pause, RETRY)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), pause)
        finally:
            if event is not None:
                listener.unregister((MAIL, key), event)

    async def publish(
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
        return await self._store._run(
            topics.publish(
                sender, topic, subject, body, priority, metadata, attachments, idempotency_key
            )
        )

    async def wake_snoozed(self) -> int:
        return await self._store._run(mail.wake_snoozed())

    async def purge_trash(self, older_than: timedelta = timedelta(days=30)) -> int:
        return await self._store._run(mail.purge_trash(older_than))


class AsyncTopicCalls:
    """``TopicCalls`` for ``AsyncStore`` (``store.topics``): the same calls, awaited."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def create(
        self,
        name: str,
        kind: str = "broadcast",
        *,
        retention: timedelta = timedelta(days=7),
        max_attempts: int = 5,
    ) -> Topic:
        return await self._store._run(topics.create(name, kind, retention, max_attempts))

    async def get(self, name: str | Topic) -> Topic:
        return await self._store._run(topics.get(name))

    async def list(self) -> builtins.list[TopicInfo]:
        return await self._store._run(topics.list_topics())

    async def delete(self, name: str | Topic) -> None:
        return await self._store._run(topics.delete(name))

    async def subscribe(self, identity: str | Identity, topic: str | Topic) -> None:
        return await self._store._run(topics.subscribe(identity, topic))

    async def unsubscribe(self, identity: str | Identity, topic: str | Topic) -> None:
        return await self._store._run(topics.unsubscribe(identity, topic))

    async def subscribers(self, topic: str | Topic) -> builtins.list[Identity]:
        return await self._store._run(topics.subscribers(topic))

    async def subscriptions(self, identity: str | Identity) -> builtins.list[Topic]:
        return await self._store._run(topics.subscriptions(identity))

    async def poll(self, identity: str | Identity, *, limit: int = 100) -> Poll:
        return await self._store._run(topics.poll(identity, limit))

    async def read(
        self, topic: str | Topic, *, after: int = 0, limit: int = 100
    ) -> builtins.list[Mail]:
        return await self._store._run(topics.read(topic, after, limit))

    async def commit(self, identity: str | Identity, topic: str | Topic, offset: int) -> int:
        return await self._store._run(topics.commit(identity, topic, offset))

    async def offset(self, identity: str | Identity, topic: str | Topic) -> int:
        return await self._store._run(topics.offset(identity, topic))

    async def claim(
        self,
        identity: str | Identity,
        topic: str | Topic,
        *,
        lease: float = 30.0,
        wait: float = 0.0,
        complete: Claim | tuple[int, str] | None = None,
    ) -> Claim | None:
        name, t, seconds, wait_s, done = topics.check_claim_args(
            identity, topic, lease, wait, complete
        )
        deadline = time.monotonic() + wait_s
        listener = self._store._listener
        key: tuple[str, int] | None = None
        event: asyncio.Event | None = None
        try:
            while True:
                if event is not None:
                    event.clear()
                held = await self._store._run(topics.claim(name, t, seconds, done))
                done = None  # completed by the first attempt (which raised if it could not)
                if held is not None:
                    return held
                topic_id, expiry = await self._store._run(topics.claim_state(name, t))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                if event is None:
                    key = (QUEUE, topic_id)
                    event = listener.register(key)
                    continue
                pause = remaining if expiry is None else min(remaining, expiry + 0.001)
                pause = pause if listener.listening else min(pause, RETRY)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), pause)
        finally:
            if event is not None and key is not None:
                listener.unregister(key, event)

    async def complete(self, claim: Claim | tuple[int, str]) -> None:
        return await self._store._run(topics.complete(claim))

    async def release(self, claim: Claim | tuple[int, str], error: str | None = None) -> str:
        return await self._store._run(topics.release(claim, error))

    async def extend(self, claim: Claim | tuple[int, str], lease: float) -> Claim:
        return await self._store._run(topics.extend(claim, lease))

    async def dead_letters(self, topic: str | Topic) -> builtins.list[DeadLetter]:
        return await self._store._run(topics.dead_letters(topic))

    async def requeue(self, mail_id: int) -> None:
        return await self._store._run(topics.requeue(mail_id))

    async def apply_retention(self) -> dict[str, int]:
        return await self._store._run(topics.apply_retention())


class AsyncTaskCalls:
    """``TaskCalls`` for ``AsyncStore`` (``store.tasks``): the same calls, awaited."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def create_list(
        self, list_id: str, owner: str | Identity, *, watch_path: str | None = None
    ) -> TaskList:
        return await self._store._run(tasks.create_list(list_id, owner, watch_path))

    async def get_list(self, list_id: str | TaskList) -> TaskList:
        return await self._store._run(tasks.get_list(list_id))

    async def lists(self) -> builtins.list[TaskList]:
        return await self._store._run(tasks.lists())

    async def upsert_task(
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
        return await self._store._run(
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

    async def get_task(self, list_id: str | TaskList, external_id: str) -> Task:
        return await self._store._run(tasks.get_task(list_id, external_id))

    async def tasks(
        self, list_id: str | TaskList, status: str | None = None
    ) -> builtins.list[Task]:
        return await self._store._run(tasks.tasks(list_id, status))

    async def available_tasks(self, list_id: str | TaskList | None = None) -> builtins.list[Task]:
        return await self._store._run(tasks.available_tasks(list_id))

    async def claim_task(
        self, list_id: str | TaskList, external_id: str, owner: str | Identity
    ) -> Task:
        return await self._store._run(tasks.claim_task(list_id, external_id, owner))

    async def release_task(
        self, list_id: str | TaskList, external_id: str, owner: str | Identity
    ) -> Task:
        return await self._store._run(tasks.release_task(list_id, external_id, owner))

    async def task_stats(self, list_id: str | TaskList | None = None) -> TaskStats:
        return await self._store._run(tasks.task_stats(list_id))

    async def sync_list(self, list_id: str | TaskList, active_external_ids: Iterable[str]) -> int:
        return await self._store._run(tasks.sync_list(list_id, active_external_ids))

    async def prune(self, older_than: timedelta) -> int:
        return await self._store._run(tasks.prune(older_than))


class AsyncActivityCalls:
    """``ActivityCalls`` for ``AsyncStore`` (``store.activities``): the same calls, awaited."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def record_activity(
        self,
        identity: str | Identity,
        type: str,
        description: str,
        metadata: dict[str, Any] | None = None,
    ) -> Activity:
        return await self._store._run(activities.record(identity, type, description, metadata))

    async def feed(
        self,
        since: datetime | None = None,
        identity: str | Identity | None = None,
        type: str | None = None,
        limit: int = 50,
        before: Activity | int | None = None,
    ) -> builtins.list[Activity]:
        return await self._store._run(activities.feed(since, identity, type, limit, before))

    async def prune_activities(self, older_than: timedelta) -> int:
        return await self._store._run(activities.prune(older_than))


class AsyncSummaryCalls:
    """``SummaryCalls`` for ``AsyncStore`` (``store.summaries``): the same calls, awaited."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def add_summary(
        self,
        identity: str | Identity,
        summary: str,
        *,
        delta: str | None = None,
        transcript_hash: str | None = None,
        cost_usd: float | None = None,
    ) -> AgentSummary:
        return await self._store._run(
            summaries.add(identity, summary, delta, transcript_hash, cost_usd)
        )

    async def latest_summary(self, identity: str | Identity) -> AgentSummary | None:
        return await self._store._run(summaries.latest(identity))

    async def summary_history(
        self, identity: str | Identity, limit: int = 10
    ) -> builtins.list[AgentSummary]:
        return await self._store._run(summaries.history(identity, limit))

    async def prune_summaries(self, identity: str | Identity | None = None, keep: int = 5) -> int:
        return await self._store._run(summaries.prune(identity, keep))

    async def add_context_summary(
        self,
        agent_uuid: str,
        summary: str,
        start_msg_id: int,
        end_msg_id: int,
        token_count: int,
    ) -> ContextSummary:
        return await self._store._run(
            summaries.add_context(agent_uuid, summary, start_msg_id, end_msg_id, token_count)
        )

    async def context_summaries(self, agent_uuid: str) -> builtins.list[ContextSummary]:
        return await self._store._run(summaries.context_summaries(agent_uuid))


class AsyncLeaseCalls:
    """``LeaseCalls`` for ``AsyncStore`` (``store.leases``): the same calls, awaited."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def acquire(
        self,
        holder: str | Identity,
        resource: str,
        *,
        ttl: timedelta | float,
        exclusive: bool = True,
    ) -> Lease:
        return await self._store._run(leases.acquire(holder, resource, ttl, exclusive))

    async def renew(self, lease: Lease | tuple[str, str], ttl: timedelta | float) -> Lease:
        return await self._store._run(leases.renew(lease, ttl))

    async def release(self, lease: Lease | tuple[str, str]) -> bool:
        return await self._store._run(leases.release(lease))

    async def force_release(self, resource: str) -> int:
        return await self._store._run(leases.force_release(resource))

    async def held(
        self, prefix: str = "", *, holder: str | Identity | None = None
    ) -> builtins.list[Lease]:
        return await self._store._run(leases.held(prefix, holder))


class AsyncReviewCalls:
    """``ReviewCalls`` for ``AsyncStore`` (``store.reviews``): the same calls, awaited."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def create(
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
        return await self._store._run(
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

    async def get(self, review_id: str | UUID | Review) -> Review:
        return await self._store._run(reviews.get(review_id))

    async def list(
        self,
        *,
        state: str | None = None,
        requester: str | Identity | None = None,
        limit: int = 50,
        before_id: int | Review | None = None,
    ) -> builtins.list[Review]:
        return await self._store._run(reviews.list_reviews(state, requester, limit, before_id))

    async def active_reviews(self) -> builtins.list[Review]:
        return await self._store._run(reviews.active())

    async def resolve_prefix(self, prefix: str) -> Review:
        return await self._store._run(reviews.resolve_prefix(prefix))

    async def fire(
        self, review_id: str | UUID | Review, event: str, *, by: str | Identity | None = None
    ) -> Review:
        return await self._store._run(reviews.fire(review_id, event, by))

    async def submit(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        return await self._store._run(reviews.fire(review_id, "submit", by))

    async def start(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        return await self._store._run(reviews.fire(review_id, "start", by))

    async def approve(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        return await self._store._run(reviews.fire(review_id, "approve", by))

    async def request_changes(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        return await self._store._run(reviews.fire(review_id, "request_changes", by))

    async def reject(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        return await self._store._run(reviews.fire(review_id, "reject", by))

    async def resubmit(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        return await self._store._run(reviews.fire(review_id, "resubmit", by))

    async def cancel(
        self, review_id: str | UUID | Review, *, by: str | Identity | None = None
    ) -> Review:
        return await self._store._run(reviews.fire(review_id, "cancel", by))

    async def record_iteration(
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
        return await self._store._run(
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

    async def iterations(self, review_id: str | UUID | Review) -> builtins.list[ReviewIteration]:
        return await self._store._run(reviews.iterations(review_id))

    async def issues(self, review_id: str | UUID | Review) -> builtins.list[ReviewIssue]:
        return await self._store._run(reviews.issues(review_id))

    async def open_issues(self, review_id: str | UUID | Review) -> builtins.list[ReviewIssue]:
        return await self._store._run(reviews.open_issues(review_id))

    async def resolve_issue(
        self, issue_id: int | ReviewIssue, status: str, iteration: int | None = None
    ) -> ReviewIssue:
        return await self._store._run(reviews.resolve_issue(issue_id, status, iteration))


class AsyncPlanCalls:
    """``PlanCalls`` for ``AsyncStore`` (``store.plans``): the same calls, awaited."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def submit_plan(
        self,
        requester: str | Identity,
        plan_path: str,
        title: str,
        summary: str,
        *,
        reviewer: str | Identity = "User",
        session_key: str | None = None,
    ) -> PlanReview:
        return await self._store._run(
            plans.submit(requester, plan_path, title, summary, reviewer, session_key)
        )

    async def decide(
        self,
        plan_review_id: str | UUID | PlanReview,
        state: str,
        comment: str | None = None,
        reviewed_by: str | Identity | None = None,
    ) -> PlanReview:
        return await self._store._run(plans.decide(plan_review_id, state, comment, reviewed_by))

    async def resubmit_plan(
        self,
        plan_review_id: str | UUID | PlanReview,
        *,
        summary: str | None = None,
        plan_path: str | None = None,
    ) -> PlanReview:
        return await self._store._run(plans.resubmit(plan_review_id, summary, plan_path))

    async def get(self, plan_review_id: str | UUID | PlanReview) -> PlanReview:
        return await self._store._run(plans.get(plan_review_id))

    async def by_thread(self, thread_id: str) -> PlanReview:
        return await self._store._run(plans.by_thread(thread_id))

    async def pending_for_session(self, session_key: str) -> builtins.list[PlanReview]:
        return await self._store._run(plans.pending_for_session(session_key))

    async def list(
        self,
        *,
        state: str | None = None,
        requester: str | Identity | None = None,
        limit: int = 50,
        before_id: int | PlanReview | None = None,
    ) -> builtins.list[PlanReview]:
        return await self._store._run(plans.list_plans(state, requester, limit, before_id))


for _cls, _twin in (
    (AsyncStore, Store),
    (AsyncIdentityCalls, IdentityCalls),
    (AsyncMailCalls, MailCalls),
    (AsyncTopicCalls, TopicCalls),
    (AsyncTaskCalls, TaskCalls),
    (AsyncActivityCalls, ActivityCalls),
    (AsyncSummaryCalls, SummaryCalls),
    (AsyncLeaseCalls, LeaseCalls),
    (AsyncReviewCalls, ReviewCalls),
    (AsyncPlanCalls, PlanCalls),
):
    for _name, _method in vars(_cls).items():
        if not _name.startswith("_") and callable(_method) and _method.__doc__ is None:
            _method.__doc__ = getattr(_twin, _name).__doc__
