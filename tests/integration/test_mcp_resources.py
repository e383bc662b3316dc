"""``ikigai-store mcp`` resources through the SDK's own client, against spawned servers.

resources/list and resources/templates/list; a read of each kind of resource returns the
store's state as JSON; bad, unknown and refused URIs are one-line MCP errors that write
nothing. Subscriptions, both the classic ``resources/subscribe`` (what ``ClientSession`` after
``initialize()`` speaks) and 2026-07-28's ``subscriptions/listen`` (after ``discover()``), hear
``notifications/resources/updated`` within a second of the commit, whichever process made
the change: the events come from PostgreSQL's NOTIFY, so two servers share them.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio
import httpx2
import mcp_types as types
import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import listen
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourceUpdated

import ikigai_store as ik
from ikigai_store.mcp import resources
from ikigai_store.mcp.resources import TEMPLATES, PgSubscriptionBus
from ikigai_store.testing import truncate_all
from tests.integration.test_mcp import HttpServer, footprint, server_args

pytestmark = [pytest.mark.db, pytest.mark.slow]

#: The promise: an update reaches a subscriber within this many seconds of the commit.
WITHIN = 1.0


@pytest.fixture
def db(ikigai_module_store: ik.Store) -> ik.Store:
    """This file's database, emptied before the test (servers are other processes)."""
    truncate_all(ikigai_module_store)
    return ikigai_module_store


class Updates:
    """The ``notifications/resources/updated`` a client session received, with their times."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str]] = []
        self._changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.seen.append((time.monotonic(), message.params.uri))
            self._changed.set()

    def of(self, uri: str) -> list[float]:
        return [at for at, seen in self.seen if seen == uri]

    async def wait(self, uri: str, *, after: float, within: float = WITHIN) -> float:
        """Seconds from ``after`` to the first update of ``uri`` received after it; fails
        the test if none comes within ``within`` seconds."""
        with anyio.move_on_after(within + 0.5):
            while True:
                late = [at for at in self.of(uri) if at >= after]
                if late:
                    delay = late[0] - after
                    assert delay <= within, f"{uri} updated after {delay:.3f} s"
                    return delay
                self._changed = anyio.Event()
                await self._changed.wait()
        raise AssertionError(f"no update of {uri} within {within} s; seen {self.seen}")

    def clear(self) -> None:
        self.seen.clear()


async def subscribe(session: ClientSession, uri: str) -> None:
    """``resources/subscribe`` (the SDK deprecates it for 2026-07-28; it is what a session
    that ran ``initialize()`` speaks)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await session.subscribe_resource(uri)


async def unsubscribe(session: ClientSession, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await session.unsubscribe_resource(uri)


@asynccontextmanager
async def stdio(
    url: str, *args: str, updates: Updates | None = None
) -> AsyncIterator[ClientSession]:
    """A client session (after ``initialize()``) with ``ikigai-store mcp ARGS`` over stdio."""
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}
    params = StdioServerParameters(command=sys.executable, args=server_args(url, *args), env=env)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=updates) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def http(
    url: str, *, updates: Updates | None = None, modern: bool = False
) -> AsyncIterator[ClientSession]:
    """A client session with an HTTP server: ``initialize()`` (the 2025-11-25 handshake),
    or ``discover()`` (2026-07-28) when ``modern``."""
    async with (
        httpx2.AsyncClient(timeout=30) as client,
        streamable_http_client(url, http_client=client) as (read, write, *_),
        ClientSession(read, write, message_handler=updates) as session,
    ):
        await (session.discover() if modern else session.initialize())
        yield session


async def read(session: ClientSession, uri: str) -> Any:
    """The JSON document at ``uri``."""
    result = await session.read_resource(uri)
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.uri == uri and content.mime_type == "application/json"
    return json.loads(content.text)


async def refused(session: ClientSession, uri: str) -> str:
    """The one-line message of the MCP error reading ``uri`` must give."""
    with pytest.raises(MCPError) as caught:
        await session.read_resource(uri)
    message = caught.value.message
    assert "\n" not in message and len(message) <= 1000 and "Traceback" not in message
    return message


def listeners(db: ik.Store) -> list[int]:
    """The sessions in session_listeners (any listener), in order."""
    with db._connection() as conn:
        rows = conn.execute("SELECT session_id FROM session_listeners ORDER BY 1").fetchall()
    return [row["session_id"] for row in rows]


# ---------------------------------------------------------------- listing and reading


def test_list_templates_and_read_every_kind(db: ik.Store, ikigai_db_url: str) -> None:
    """resources/list names the identity's inbox and leases and the task lists (not another
    project's); the templates cover the six kinds; each read returns the store's state as
    JSON, path parts percent-encoded."""
    db.identities.register("Ann")
    db.identities.register("Bob")
    mail = db.mail.send("Bob", "Ann", "hello", "first")
    db.mail.send("Ann", "Bob", "unseen by Ann", "not in Ann's thread view")
    db.tasks.create_list("team/one two", "Bob")
    db.tasks.upsert("team/one two", "1", subject="lexer")
    db.tasks.upsert("team/one two", "2", subject="parser", blocked_by=["1"])
    db.tasks.create_list("theirs", db.identities.register("Eve", project_key="/elsewhere"))
    lease = db.leases.acquire("Ann", "file:/repo/a b.py", ttl=600)
    session = db.create_session("history")
    agent = db.create_agent(session, name="coder")
    db.append(session, "user", "hello world", agent_uuid=agent.uuid)
    db.append(session, "assistant", "hi", agent_uuid=agent.uuid)
    thread_uri = f"ikigai://thread/{mail.thread_id}"

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "Ann") as ann:
            listed = {r.uri: r for r in (await ann.list_resources()).resources}
            assert set(listed) == {
                "ikigai://inbox/Ann",
                "ikigai://leases/Ann",
                "ikigai://tasks/team%2Fone%20two",
            }
            assert all(r.mime_type == "application/json" for r in listed.values())
            templates = (await ann.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == [t[1] for t in TEMPLATES]
            assert len(templates) == 6

            inbox = await read(ann, "ikigai://inbox/Ann")
            assert inbox["identity"] == "Ann" and inbox["counts"]["unread"] == 1
            assert [item["mail"]["subject"] for item in inbox["items"]] == ["hello"]
            thread = await read(ann, thread_uri)
            assert [m["subject"] for m in thread["mail"]] == ["hello"]
            tasks = await read(ann, "ikigai://tasks/team%2Fone%20two")
            assert tasks["list"]["list_id"] == "team/one two"
            assert [(t["external_id"], t["blocked_by"]) for t in tasks["tasks"]] == [
                ("1", []),
                ("2", ["1"]),
            ]
            leases = await read(ann, "ikigai://leases/Ann")
            assert [(x["resource"], x["token"]) for x in leases["leases"]] == [
                (lease.resource, lease.token)
            ]
            assert (await read(ann, "ikigai://leases/Bob"))["leases"] == []
            context = await read(ann, f"ikigai://session/{session}/context")
            assert context["session_id"] == session
            assert [m["id"] for m in context["messages"]] == db.replay_session(session).message_ids
            assert context["messages"][0]["content"] == "hello world"
            mine = await read(ann, f"ikigai://agent/{agent.uuid}/context")
            assert mine["agent_uuid"] == agent.uuid
            assert [m["id"] for m in mine["messages"]] == db.replay_agent(agent.uuid).message_ids

        async with stdio(ikigai_db_url, "--as", "Op", "--operator") as op:
            assert (await read(op, "ikigai://inbox/Ann"))["counts"]["unread"] == 1
            assert len((await read(op, thread_uri))["mail"]) == 1

    anyio.run(scenario)


def test_bad_uris_are_errors_that_write_nothing(db: ik.Store, ikigai_db_url: str) -> None:
    """Malformed, unknown and refused URIs (read or subscribed) are one-line MCP errors
    naming the problem; nothing is written, and the server answers the next request."""
    db.identities.register("Ann")
    db.identities.register("Bob")
    db.tasks.create_list("L", "Bob")

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "Ann") as ann:
            await read(ann, "ikigai://inbox/Ann")  # Ann is registered
            before = footprint(db)
            for uri, expected in [
                ("http://example.com/", "not an ikigai:// URI"),
                ("ikigai://nope/1", "unknown resource"),
                ("ikigai://inbox/", "malformed"),
                ("ikigai://inbox/Ann/more", "malformed"),
                ("ikigai://inbox/Ann?x=1", "malformed"),
                ("ikigai://session/1/contexts", "malformed"),
                ("ikigai://session/abc/context", "positive integer"),
                ("ikigai://session/99999999/context", "NotFound"),
                ("ikigai://session/99999999999999999999999/context", "InvalidArgument"),
                ("ikigai://agent/not-a-uuid/context", "not-a-uuid"),
                ("ikigai://agent/00000000-0000-4000-8000-000000000000/context", "NotFound"),
                ("ikigai://tasks/Nope", "NotFound"),
                ("ikigai://leases/Nobody", "NotFound"),
                ("ikigai://inbox/%FF", "invalid UTF-8"),
                ("ikigai://inbox/Bob", "reads ikigai://inbox/Ann only"),
                ("ikigai://inbox/" + "x" * 10_000, "at most"),
            ]:
                message = await refused(ann, uri)
                assert expected in message, (uri, message)
                if "NotFound" in expected or "only" in expected:
                    with pytest.raises(MCPError):
                        await subscribe(ann, uri)
            assert footprint(db) == before, "a refused read or subscription wrote something"
            assert (await read(ann, "ikigai://tasks/L"))["tasks"] == []

    anyio.run(scenario)


# ---------------------------------------------------------------- subscriptions


def test_two_http_servers_share_inbox_updates(db: ik.Store, ikigai_db_url: str) -> None:
    """B subscribes to its inbox on server 1 (classic subscribe, and a 2026-07-28 listen
    stream); A sends B mail through server 2: both hear resources/updated within a second
    of the send returning, and the inbox then shows the mail."""
    one = HttpServer(ikigai_db_url, "--as", "B")
    two = HttpServer(ikigai_db_url, "--as", "A")
    inbox = "ikigai://inbox/B"
    updates = Updates()
    delays: dict[str, float] = {}

    async def scenario() -> None:
        async with (
            http(one.url, updates=updates) as b,
            http(one.url, modern=True) as b_modern,
            http(two.url) as a,
        ):
            assert b.protocol_version == "2025-11-25"
            assert b_modern.protocol_version == "2026-07-28"
            await a.call_tool("whoami", {})  # registers A
            await read(b, inbox)  # registers B
            await subscribe(b, inbox)
            async with listen(b_modern, resource_subscriptions=[inbox]) as stream:
                heard: list[float] = []

                async def drain() -> None:
                    async for event in stream:
                        assert event == ResourceUpdated(uri=inbox)
                        heard.append(time.monotonic())

                async with anyio.create_task_group() as group:
                    group.start_soon(drain)
                    for _ in range(3):
                        # An update may even arrive before the send's answer does.
                        start = time.monotonic()
                        result = await a.call_tool(
                            "send_mail", {"to": ["B"], "subject": "ping", "body": "b"}
                        )
                        sent = time.monotonic()
                        assert not result.is_error
                        delays["subscribe"] = await updates.wait(inbox, after=start) - (
                            sent - start
                        )
                        with anyio.fail_after(WITHIN):
                            while not [at for at in heard if at >= start]:
                                await anyio.sleep(0.005)
                        delays["listen"] = next(at for at in heard if at >= start) - sent
                    group.cancel_scope.cancel()
            items = (await read(b, inbox))["items"]
            assert [item["mail"]["subject"] for item in items] == ["ping"] * 3

    try:
        anyio.run(scenario)
    finally:
        one.stop()
        two.stop()
    assert all(delay <= WITHIN for delay in delays.values()), delays


def test_tasks_leases_threads_and_contexts_update(db: ik.Store, ikigai_db_url: str) -> None:
    """Subscriptions to a task list, an identity's leases, a thread and a session's and an
    agent's context hear the changes committed by another process; unsubscribed ones hear
    nothing; a watched session is in session_listeners until its last subscriber leaves;
    when the server's LISTEN connection is cut, every subscription hears an update."""
    db.identities.register("Ann")
    db.identities.register("Bob")
    db.tasks.create_list("L", "Ann")
    db.tasks.create_list("M", "Ann")
    mail = db.mail.send("Bob", "Ann", "thread", "start")
    session = db.create_session("watched")
    agent = db.create_agent(session, name="coder")
    quiet = db.create_session("not watched")
    uris = {
        "tasks": "ikigai://tasks/L",
        "leases": "ikigai://leases/Ann",
        "thread": f"ikigai://thread/{mail.thread_id}",
        "session": f"ikigai://session/{session}/context",
        "agent": f"ikigai://agent/{agent.uuid}/context",
    }
    dropped = ["ikigai://tasks/M", "ikigai://leases/Bob", f"ikigai://session/{quiet}/context"]
    server = HttpServer(ikigai_db_url, "--as", "Ann")
    updates = Updates()

    async def changed(uri: str, change: Any) -> None:
        change()
        await updates.wait(uri, after=time.monotonic())

    async def scenario() -> None:
        async with http(server.url, updates=updates) as ann:
            for uri in [*uris.values(), *dropped]:
                await subscribe(ann, uri)
            assert listeners(db) == sorted([session, quiet])
            for uri in dropped:
                await unsubscribe(ann, uri)
            await unsubscribe(ann, uris["agent"])
            await subscribe(ann, uris["agent"])
            assert listeners(db) == [session]
            await anyio.sleep(0.2)
            updates.clear()

            await changed(uris["tasks"], lambda: db.tasks.upsert("L", "1", subject="lexer"))
            await changed(uris["leases"], lambda: db.leases.acquire("Ann", "file:/a", ttl=60))
            await changed(uris["thread"], lambda: db.mail.reply("Ann", mail.id, "answer"))
            start = time.monotonic()
            db.append(session, "user", "more", agent_uuid=agent.uuid)
            await updates.wait(uris["session"], after=start)
            await updates.wait(uris["agent"], after=start)
            db.tasks.upsert("M", "1", subject="not watched")
            db.leases.acquire("Bob", "file:/b", ttl=60)
            db.append(quiet, "user", "not watched")
            await anyio.sleep(0.5)
            heard = {uri for _, uri in updates.seen}
            assert heard == set(uris.values()), heard

            # A cut LISTEN connection: at reconnection every subscription hears an update.
            updates.clear()
            with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
                cut = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND query LIKE 'LISTEN%'"
                    " AND pid <> pg_backend_pid()"
                ).fetchall()
            assert cut
            start = time.monotonic()
            for uri in uris.values():
                await updates.wait(uri, after=start, within=5.0)

            await unsubscribe(ann, uris["session"])
            assert listeners(db) == [session]  # the agent's context still watches it
        # The client left: its connection closed, and its subscriptions with it.
        deadline = time.monotonic() + 10
        while listeners(db) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert listeners(db) == []

    try:
        anyio.run(scenario)
    finally:
        server.stop()


def test_stdio_subscription_hears_mail(db: ik.Store, ikigai_db_url: str) -> None:
    """Over stdio too, a subscribed inbox hears resources/updated when mail arrives, and an
    unsubscribed one no longer does."""
    db.identities.register("Bob")
    updates = Updates()

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "Ann", updates=updates) as ann:
            await subscribe(ann, "ikigai://inbox/Ann")
            start = time.monotonic()
            db.mail.send("Bob", "Ann", "hi", "there")
            await updates.wait("ikigai://inbox/Ann", after=start)
            await unsubscribe(ann, "ikigai://inbox/Ann")
            updates.clear()
            db.mail.send("Bob", "Ann", "hi", "again")
            await anyio.sleep(0.5)
            assert updates.seen == []

    anyio.run(scenario)


def test_session_listener_rows_are_kept_alive_and_pruned(
    db: ik.Store, ikigai_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a session is watched, this server's session_listeners row is pushed forward
    (and another's expired row pruned); the last unwatch removes it, and a second watch of
    the session keeps it until then."""
    monkeypatch.setattr(resources, "SESSION_TTL", timedelta(seconds=2))
    monkeypatch.setattr(resources, "SESSION_REFRESH", 0.2)
    session = db.create_session("kept")
    agent = db.create_agent(session, name="coder")
    with db._connection() as conn:
        conn.execute(
            "INSERT INTO session_listeners VALUES (%s, gen_random_uuid(), now() - interval '1s')",
            (session,),
        )

    def expiry(listener: uuid.UUID) -> Any:
        with db._connection() as conn:
            row = conn.execute(
                "SELECT expires_at FROM session_listeners WHERE listener = %s", (listener,)
            ).fetchone()
        return None if row is None else row["expires_at"]

    async def scenario() -> None:
        async with ik.open_async(ikigai_db_url) as store:
            bus = PgSubscriptionBus(store)
            context = f"ikigai://session/{session}/context"
            agents = f"ikigai://agent/{agent.uuid}/context"
            unwatch = await bus.watch(context, resources.parse(context))
            also = await bus.watch(agents, resources.parse(agents))
            first = expiry(bus.listener)
            assert first is not None and len(listeners(db)) == 2
            await anyio.sleep(0.7)
            assert expiry(bus.listener) > first
            assert listeners(db) == [session]  # the expired row is gone
            await unwatch()
            await unwatch()  # idempotent
            assert expiry(bus.listener) is not None
            await also()
            assert listeners(db) == []
            await bus.watch(context, resources.parse(context))
            assert listeners(db) == [session]
            await bus.close()
            assert listeners(db) == []

    anyio.run(scenario)
