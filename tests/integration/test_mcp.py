"""``ikigai-store mcp`` through the SDK's own client, against spawned servers (stdio and HTTP).

Every tool is called with valid input and with hostile input (wrong types, unknown arguments,
unknown identities, oversized and invalid text): hostile calls are tool errors with a one-line
message and write nothing. Two servers act as two identities; sixteen concurrent clients race
for one reservation; the HTTP transport needs its token off loopback; a database outage fails
only the calls made during it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

import ikigai_store as ik
from ikigai_store.mcp.tools import CORE, MAX_DESCRIPTION, TOOLS
from ikigai_store.testing import truncate_all

pytestmark = [pytest.mark.db, pytest.mark.slow]

SNAPSHOT = Path(__file__).parent.parent / "fixtures" / "mcp_tools.json"


@pytest.fixture
def db(ikigai_module_store: ik.Store) -> ik.Store:
    """This file's database, emptied before the test (servers are other processes)."""
    truncate_all(ikigai_module_store)
    return ikigai_module_store


def server_args(url: str, *args: str) -> list[str]:
    return ["-m", "ikigai_store", "--database", url, "mcp", *args]


@asynccontextmanager
async def stdio(url: str, *args: str, cwd: Path | None = None) -> AsyncIterator[ClientSession]:
    """A client session with ``ikigai-store mcp ARGS`` spawned over stdio."""
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}
    params = StdioServerParameters(
        command=sys.executable, args=server_args(url, *args), env=env, cwd=cwd
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, /, **arguments: Any) -> Any:
    """The tool's structured result; fails the test on a tool error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}{arguments}: {result.content[0].text}"  # type: ignore[union-attr]
    structured = result.structured_content
    assert structured is not None
    assert json.loads(result.content[0].text) == structured  # type: ignore[union-attr]
    return structured.get("result", structured)


async def error(session: ClientSession, name: str, arguments: dict[str, Any]) -> str:
    """The one-line text of the tool error ``name(arguments)`` must give."""
    result = await session.call_tool(name, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error, f"{name}{arguments} succeeded: {text[:200]}"
    assert "\n" not in text and len(text) <= 1000 and re.match(r"^[A-Za-z]+[:( ]", text), text
    return text


def footprint(store: ik.Store) -> dict[str, str]:
    """A digest of every application table but the identities' activity times."""
    with store._connection() as conn:
        tables = [
            row["relname"]
            for row in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'public' AND c.relkind = 'r'"
                " AND c.relname NOT LIKE '\\_yoyo%' AND c.relname NOT LIKE 'yoyo%'"
                " AND c.relname NOT IN ('identities', 'session_identities')"
            )
        ]
        return {
            table: conn.execute(
                f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS digest"
                f" FROM {table} AS t"
            ).fetchone()["digest"]  # type: ignore[index]
            for table in tables
        }


# ---------------------------------------------------------------- the tool list


def test_tool_list_is_stable_small_and_derived(db: ik.Store, ikigai_db_url: str) -> None:
    """tools/list (default: core) matches the operations' derived schemas and the snapshot;
    core has <= 12 tools and costs <= 8,000 tokens (JSON characters / 4); every description
    is <= 2 KB; the full list's names and input schemas match tests/fixtures/mcp_tools.json."""

    async def scenario() -> tuple[list[Any], list[Any]]:
        async with stdio(ikigai_db_url, "--as", "Ann") as core:
            listed_core = (await core.list_tools()).tools
        async with stdio(ikigai_db_url, "--as", "Ann", "--tools", "full") as full:
            listed_full = (await full.list_tools()).tools
        return listed_core, listed_full

    listed_core, listed_full = anyio.run(scenario)
    assert [t.name for t in listed_core] == [t.name for t in CORE] and len(CORE) <= 12
    core_json = json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in listed_core])
    assert len(core_json) / 4 <= 8000, f"core tools/list costs {len(core_json) / 4:.0f} tokens"
    assert all(len(t.description or "") <= MAX_DESCRIPTION for t in listed_full)
    by_name = {t.name: t for t in TOOLS}
    for tool in listed_full:
        assert tool.input_schema == by_name[tool.name].input_schema(False)
        assert tool.output_schema == by_name[tool.name].output_schema
        assert tool.output_schema["type"] == "object"
    snapshot = {t.name: t.input_schema for t in listed_full}
    if os.environ.get("IKIGAI_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    assert snapshot == json.loads(SNAPSHOT.read_text()), (
        "the MCP tools changed: review, then IKIGAI_UPDATE_SNAPSHOTS=1 to update the snapshot"
    )


# ---------------------------------------------------------------- every tool


def valid_calls(ctx: dict[str, Any]) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """Every tool with valid arguments, in an order that builds what later calls need;
    ``ctx`` collects ids from results (see test_every_tool)."""
    return [
        ("whoami", lambda: {}),
        ("list_agents", lambda: {}),
        ("get_agent", lambda: {"name": "Bob"}),
        ("send_mail", lambda: {"to": ["Bob"], "subject": "hello", "body": "first"}),
        ("reply", lambda: {"mail_id": ctx["from_bob"], "body": "thanks"}),
        ("fetch_inbox", lambda: {"state": "unread", "limit": 10}),
        ("read_message", lambda: {"mail_id": ctx["from_bob"]}),
        ("set_mail_state", lambda: {"mail_id": ctx["from_bob"], "state": "starred"}),
        ("ack_message", lambda: {"mail_id": ctx["from_bob"]}),
        ("read_thread", lambda: {"thread_id": ctx["thread"]}),
        ("search_mail", lambda: {"query": "hello"}),
        ("mail_status", lambda: {}),
        ("wait_for_mail", lambda: {"timeout": 0}),
        ("list_topics", lambda: {}),
        ("create_topic", lambda: {"name": "builds", "kind": "queue"}),
        ("subscribe", lambda: {"topic": "news"}),
        ("subscribe", lambda: {"topic": "jobs"}),
        ("publish", lambda: {"topic": "news", "subject": "release", "body": "0.7"}),
        ("poll_topics", lambda: {}),
        ("commit_offset", lambda: {"topic": "news", "offset": 1}),
        ("publish", lambda: {"topic": "jobs", "subject": "job", "body": "do it"}),
        ("publish_many", lambda: {"topic": "news", "bodies": ["a", "b"], "subject": "batch"}),
        ("claim_message", lambda: {"topic": "jobs", "ttl": 30}),
        ("extend_claim", lambda: {"claim": ctx["claim"], "ttl": 60}),
        ("release_message", lambda: {"claim": ctx["claim"], "error": "later"}),
        ("claim_message", lambda: {"topic": "jobs", "ttl": 30, "wait": 0.1}),
        ("complete_message", lambda: {"claim": ctx["claim"]}),
        ("unsubscribe", lambda: {"topic": "news"}),
        ("reserve", lambda: {"resource": "file:/repo/src/*.py", "ttl": 60}),
        ("renew_reservation", lambda: {"lease": ctx["lease"], "ttl": 120}),
        ("list_reservations", lambda: {"prefix": "file:"}),
        ("wait_for_reservation", lambda: {"resource": "file:/elsewhere.py"}),
        ("release_reservation", lambda: {"lease": ctx["lease"]}),
        ("request_review", lambda: {"reviewers": ["Bob"], "branch": "feature"}),
        ("review_status", lambda: {"review_id": ctx["review"]}),
        ("list_reviews", lambda: {"state": "pending_review"}),
        ("review_event", lambda: {"review_id": ctx["review"], "event": "cancel"}),
        ("record_review", lambda: {
            "review_id": ctx["bobs_review"], "decision": "request_changes", "summary": "fix",
            "issues": [{"title": "bug", "issue_type": "bug", "severity": "high",
                        "file_path": "a.py", "line_start": 1, "description": "off by one"}],
        }),
        ("open_issues", lambda: {"review_id": ctx["bobs_review"]}),
        ("resolve_issue", lambda: {"issue_id": ctx["issue"], "status": "fixed"}),
        ("submit_plan", lambda: {"plan_path": "/repo/plan.md", "title": "Plan",
                                 "summary": "do things", "reviewer": "Bob"}),
        ("plan_status", lambda: {"plan_review_id": ctx["plan"]}),
        ("decide_plan", lambda: {"plan_review_id": ctx["bobs_plan"], "state": "approved"}),
        ("task_lists", lambda: {}),
        ("create_task_list", lambda: {"list_id": "M"}),
        ("upsert_task", lambda: {"list_id": "L", "external_id": "1", "subject": "lexer"}),
        ("upsert_task", lambda: {"list_id": "L", "external_id": "2", "subject": "parser",
                                 "blocked_by": ["1"]}),
        ("list_tasks", lambda: {"list_id": "L"}),
        ("available_tasks", lambda: {"list_id": "L"}),
        ("claim_task", lambda: {"list_id": "L", "external_id": "1"}),
        ("release_task", lambda: {"list_id": "L", "external_id": "1"}),
        ("claim_task", lambda: {"list_id": "L", "external_id": "1"}),
        ("complete_task", lambda: {"list_id": "L", "external_id": "1"}),
        ("task_stats", lambda: {"list_id": "L"}),
        ("record_activity", lambda: {"activity_type": "commit", "description": "did it"}),
        ("activity_feed", lambda: {"limit": 5}),
        ("search_history", lambda: {"query": "hello"}),
        ("replay_session", lambda: {"session_id": ctx["session"]}),
        ("replay_agent", lambda: {"agent_uuid": ctx["agent"]}),
        ("register", lambda: {"name": "Newcomer"}),
    ]  # fmt: skip


def _wrong(schema: dict[str, Any]) -> Any:
    """A JSON value of a type the property's schema refuses (None: it takes any JSON)."""
    types = set(re.findall(r'"type": "(\w+)"', json.dumps(schema)))
    if not types or types >= {"object", "array", "string", "number", "boolean", "null"}:
        return None
    if "object" not in types:
        return {"not": "this"}
    return "not this" if "string" not in types else 12.5


def test_every_tool_valid_then_hostile(db: ik.Store, ikigai_db_url: str) -> None:
    """Every tool works with valid input; with hostile input (each parameter of a wrong type,
    an unknown argument, a missing one, an unknown identity, text over its limit) it is a
    one-line tool error and nothing is written."""
    db.identities.register("Bob")
    db.topics.create("news")
    db.topics.create("jobs", "queue")
    db.tasks.create_list("L", "Bob")
    session = db.create_session("history")
    agent = db.create_agent(session, name="coder")
    db.append(session, "user", "hello world", agent_uuid=agent.uuid)
    ctx: dict[str, Any] = {"session": session, "agent": agent.uuid}

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "Ann", "--tools", "full") as ann:
            await call(ann, "whoami")  # registers Ann
            ctx["from_bob"] = db.mail.send("Bob", "Ann", "hi Ann", "from bob").id
            bobs = db.reviews.create("Bob", reviewers="Ann")
            ctx["bobs_review"] = bobs.review_id
            db.reviews.submit(bobs, by="Bob")
            db.reviews.start(bobs, by="Ann")
            bobs_plan = db.plans.submit("Bob", "/p.md", "P", "s", reviewer="Ann")
            ctx["bobs_plan"] = bobs_plan.plan_review_id
            called = set()
            for name, make in valid_calls(ctx):
                result = await call(ann, name, **make())
                called.add(name)
                if name == "send_mail":
                    ctx["thread"] = result["thread_id"]
                elif name == "claim_message":
                    ctx["claim"] = [result["mail"]["id"], result["token"]]
                elif name == "reserve":
                    ctx["lease"] = [result["resource"], result["token"]]
                elif name == "request_review":
                    ctx["review"] = result["review_id"]
                elif name == "record_review":
                    ctx["issue"] = db.reviews.open_issues(ctx["bobs_review"])[0].id
                elif name == "submit_plan":
                    ctx["plan"] = result["plan_review_id"]
                elif name == "register":
                    assert result["name"] == "Newcomer"
                elif name == "whoami":
                    assert result["name"] == "Ann"
            assert called == {t.name for t in TOOLS}
            assert (await call(ann, "whoami"))["name"] == "Ann"  # register kept the identity

        async with stdio(ikigai_db_url, "--as", "Ann", "--tools", "full") as ann:
            before = footprint(db)
            listed = {t.name: t for t in (await ann.list_tools()).tools}
            for name, make in valid_calls(ctx):
                good = make()
                properties = listed[name].input_schema["properties"]
                for param, schema in properties.items():
                    if (wrong := _wrong(schema)) is not None:
                        await error(ann, name, {**good, param: wrong})
                await error(ann, name, {**good, "no_such_argument": 1})
                for param in listed[name].input_schema.get("required", ()):
                    await error(ann, name, {k: v for k, v in good.items() if k != param})
            for name, arguments in [
                ("send_mail", {"to": "Nobody", "subject": "s", "body": "b"}),
                ("get_agent", {"name": "Nobody"}),
                ("request_review", {"reviewers": "Nobody"}),
                ("list_reservations", {"holder": "Nobody"}),
                ("send_mail", {"to": "Bob", "subject": "s" * 1_000_001, "body": "b"}),
                ("reserve", {"resource": "r" * 100_000, "ttl": 1}),
                ("upsert_task", {"list_id": "L" * 100_000, "external_id": "1", "subject": "s"}),
                ("search_mail", {"query": "q" * 100_000}),
                ("send_mail", {"to": "Bob", "subject": "nul\x00", "body": "b"}),
                ("ack_message", {"mail_id": 2**63}),
                ("wait_for_mail", {"timeout": 121}),
                ("no_such_tool", {}),
            ]:
                message = await error(ann, name, arguments)
                assert "Nobody" in message or "Bob" not in message
            assert footprint(db) == before, "a refused call wrote something"

    anyio.run(scenario)


def test_feed_and_reviews_page_by_id(db: ik.Store, ikigai_db_url: str) -> None:
    """activity_feed and list_reviews page with `before` (the last item's id), as their
    descriptions say: the pages neither repeat nor skip."""
    db.identities.register("Ann")
    for n in range(3):
        db.activities.record("Ann", "commit", f"c{n}")
        db.reviews.create("Ann", reviewers="Ann", branch=f"b{n}")

    async def scenario() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        async with stdio(ikigai_db_url, "--as", "Ann", "--tools", "full") as ann:
            feed = await call(ann, "activity_feed", activity_type="commit", limit=2)
            rest = await call(ann, "activity_feed", activity_type="commit", before=feed[-1]["id"])
            reviews = await call(ann, "list_reviews", limit=2)
            older = await call(ann, "list_reviews", before=reviews[-1]["id"])
        return feed, rest, reviews, older

    feed, rest, reviews, older = anyio.run(scenario)
    assert [a["description"] for a in feed + rest] == ["c2", "c1", "c0"]
    assert [r["branch"] for r in reviews + older] == ["b2", "b1", "b0"]


def test_task_tools_keep_to_the_servers_project(
    db: ik.Store, ikigai_db_url: str, tmp_path: Path
) -> None:
    """task_lists and available_tasks give the server's project's lists and those of no
    project, never another project's (not even named); the project is not the caller's to
    choose (an argument naming it is refused)."""
    here, there = tmp_path / "here", tmp_path / "there"
    for project in (here, there):
        project.mkdir()
    mine = db.identities.resolve(str(here.resolve()), role="main")
    theirs = db.identities.resolve(str(there.resolve()), role="main")
    db.identities.register("Shared")
    for list_id, owner in (("mine", mine.name), ("theirs", theirs.name), ("shared", "Shared")):
        db.tasks.create_list(list_id, owner)
        db.tasks.upsert(list_id, "1", subject=f"a task of {list_id}")

    async def scenario() -> tuple[Any, ...]:
        async with stdio(ikigai_db_url, "--project", str(here), "--tools", "full") as agent:
            lists = await call(agent, "task_lists")
            free = await call(agent, "available_tasks")
            named = await call(agent, "available_tasks", list_id="theirs")
            refused = await error(agent, "available_tasks", {"project_key": str(there)})
            listing = {t.name: t for t in (await agent.list_tools()).tools}
        return lists, free, named, refused, listing

    lists, free, named, refused, listing = anyio.run(scenario)
    assert [x["list_id"] for x in lists] == ["mine", "shared"]
    assert [(t["list_id"], t["external_id"]) for t in free] == [("mine", "1"), ("shared", "1")]
    assert named == [] and "project_key" in refused
    for name in ("task_lists", "available_tasks"):
        assert "project_key" not in listing[name].input_schema["properties"]
        assert "Only this project's task lists" in (listing[name].description or "")
    assert [t.list_id for t in db.tasks.available()] == ["mine", "theirs", "shared"]


def test_lone_surrogates_write_nothing(db: ik.Store, ikigai_db_url: str) -> None:
    """A request carrying a lone surrogate (invalid Unicode) is answered with a JSON-RPC
    parse error (not left unanswered), writes nothing, and the server answers the next
    request (in-process, the tool error names the parameter)."""
    db.identities.register("Bob")
    before = footprint(db)
    proc = subprocess.Popen(
        [sys.executable, *server_args(ikigai_db_url, "--as", "Ann")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    try:
        send(
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
            '"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}'
        )
        assert json.loads(proc.stdout.readline())["id"] == 1
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        send(
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send_mail",'
            '"arguments":{"to":"Bob","subject":"a\\ud800b","body":"x"}}}'
        )
        send('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami"}}')
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 2 and answer["error"]["code"] == -32700, answer
        assert "surrogate" in answer["error"]["message"]
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 3 and answer["result"]["structuredContent"]["name"] == "Ann"
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
    assert footprint(db) == before

    async def in_process() -> str:
        from ikigai_store.mcp.server import Face

        async with ik.open_async(ikigai_db_url) as store:
            face = Face(store, TOOLS, name="Ann")
            result = await face.call("send_mail", {"to": "Bob", "subject": "a\ud800", "body": "x"})
            assert result.is_error
            return result.content[0].text  # type: ignore[union-attr]

    assert "subject" in anyio.run(in_process) and footprint(db) == before


# ---------------------------------------------------------------- identities


def test_two_servers_are_two_identities(db: ik.Store, ikigai_db_url: str, tmp_path: Path) -> None:
    """Mail from A's server reaches B's; B cannot ack (or read) A's mail; neither can name
    another sender; without --as each resolves its project's identity, stable across
    restarts; an operator server acts for any identity."""
    project = tmp_path / "project"
    project.mkdir()

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "A") as a, stdio(ikigai_db_url, "--as", "B") as b:
            await call(b, "whoami")  # registers B
            sent = await call(a, "send_mail", to="B", subject="ping", body="are you there")
            assert sent["sender"] == "A"
            await error(a, "send_mail", {"sender": "B", "to": "A", "subject": "s", "body": "b"})
            inbox = await call(b, "fetch_inbox")
            assert [item["mail"]["subject"] for item in inbox] == ["ping"]
            to_a = await call(b, "reply", mail_id=sent["id"], body="yes")
            # B holds no copy of the reply it sent to A: it cannot ack A's copy.
            before = footprint(db)
            assert "NotFound" in await error(b, "ack_message", {"mail_id": to_a["id"]})
            assert footprint(db) == before
            assert (await call(a, "ack_message", mail_id=to_a["id"]))["acked_at"] is not None
        names = []
        for _ in range(2):
            async with stdio(ikigai_db_url, cwd=project) as agent:
                names.append((await call(agent, "whoami"))["name"])
        assert names[0] == names[1] and names[0] not in {"A", "B"}
        async with stdio(ikigai_db_url, "--as", "Op", "--operator") as op:
            sent = await call(op, "send_mail", as_identity="A", to="B", subject="s", body="b")
            assert sent["sender"] == "A"
            assert (await call(op, "whoami"))["name"] == "Op"

    anyio.run(scenario)
    mine = db.identities.resolve(str(project.resolve()))
    assert mine.purpose == "main"


# ---------------------------------------------------------------- HTTP


class HttpServer:
    """``ikigai-store mcp --http`` in a subprocess, on a free port."""

    def __init__(self, url: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *server_args(url, "--http", "--port", "0", *args)],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        found = re.search(r"serving (http://\S+/mcp)", line)
        if found is None:
            self.stop()
            raise AssertionError(f"no server: {line}")
        self.url = found.group(1)

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as client,
        streamable_http_client(url, http_client=client) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def test_sixteen_clients_race_for_one_reservation(db: ik.Store, ikigai_db_url: str) -> None:
    """16 concurrent HTTP clients (as 16 identities, through an operator server) reserve one
    file exclusively: exactly one wins, the others get Conflict naming the winner."""
    names = [f"agent{i}" for i in range(16)]
    for name in names:
        db.identities.register(name)
    server = HttpServer(ikigai_db_url, "--as", "Op", "--operator")
    outcomes: dict[str, Any] = {}

    async def one(name: str) -> None:
        async with http_session(server.url) as session:
            result = await session.call_tool(
                "reserve", {"resource": "file:/repo/main.py", "ttl": 60, "as_identity": name}
            )
            outcomes[name] = result

    async def race() -> None:
        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(one, name)

    try:
        anyio.run(race)
    finally:
        server.stop()
    winners = [n for n, r in outcomes.items() if not r.is_error]
    assert len(outcomes) == 16 and len(winners) == 1
    for name, result in outcomes.items():
        if name != winners[0]:
            assert "Conflict" in result.content[0].text and winners[0] in result.content[0].text
    assert [lease.holder for lease in db.leases.held("file:")] == winners


def test_http_needs_its_token_and_refuses_open_binds(db: ik.Store, ikigai_db_url: str) -> None:
    """Off loopback without a token the server refuses to start; with a token every request
    needs it (401 without, or with a wrong one) and the tools work with it."""
    refused = subprocess.run(
        [sys.executable, *server_args(ikigai_db_url, "--http", "--host", "0.0.0.0")],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "IKIGAI_MCP_TOKEN"},
    )
    assert refused.returncode == 1 and "token" in refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr

    server = HttpServer(ikigai_db_url, "--as", "Ann", env={"IKIGAI_MCP_TOKEN": "s3cret"})
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            response = httpx2.post(server.url, json={}, headers=headers, timeout=30)
            assert response.status_code == 401

        async def with_token() -> str:
            async with http_session(server.url, "s3cret") as session:
                return str((await call(session, "whoami"))["name"])

        assert anyio.run(with_token) == "Ann"
    finally:
        server.stop()


def test_http_on_any_loopback_address_checks_host_and_origin(
    db: ik.Store, ikigai_db_url: str
) -> None:
    """On a loopback address the SDK does not know by name (127.0.0.2), a request naming
    another Host (DNS rebinding) or from another Origin is refused, as on 127.0.0.1; the
    server's own address works."""
    server = HttpServer(ikigai_db_url, "--as", "Ann", "--host", "127.0.0.2")
    try:
        assert server.url.startswith("http://127.0.0.2:")
        port = server.url.split(":")[2].split("/")[0]
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "probe", "version": "0"},
            },
        }
        accept = {"Accept": "application/json, text/event-stream"}

        def status(**headers: str) -> int:
            sent = httpx2.post(
                server.url, json=initialize, headers={**accept, **headers}, timeout=30
            )
            return sent.status_code

        assert status(Host="evil.example") == 421
        assert status(Host=f"evil.example:{port}") == 421
        assert status(Origin="http://evil.example") == 403
        assert status() == 200
        assert status(Origin=f"http://127.0.0.2:{port}") == 200
    finally:
        server.stop()


# ---------------------------------------------------------------- outages


def test_database_outage_fails_calls_then_recovers(
    db: ik.Store, ikigai_db_url: str, ikigai_server_url: str
) -> None:
    """While the database refuses connections a tool call is a tool error naming the outage
    (the server lives on); once it is back the next call works."""
    name = psycopg.conninfo.conninfo_to_dict(ikigai_db_url)["dbname"]

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "Ann") as ann:
            assert (await call(ann, "whoami"))["name"] == "Ann"
            with psycopg.connect(ikigai_server_url, autocommit=True) as c:
                c.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
                c.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    (name,),
                )
                try:
                    for _ in range(2):
                        text = await error(ann, "whoami", {})
                        assert (
                            "DatabaseUnavailable" in text
                            or "ConnectionLost" in text
                            or ("ConnectError" in text)
                        ), text
                finally:
                    c.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            deadline = time.monotonic() + 30
            while True:
                result = await ann.call_tool("whoami", {})
                if not result.is_error or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.2)
            assert not result.is_error, result.content[0].text  # type: ignore[union-attr]

    anyio.run(scenario)
    # This process's pooled connections were terminated too: the first call says so.
    for _ in range(3):  # the module store has 2 connections
        with contextlib.suppress(ik.ConnectionLost):
            db.identities.get("Ann")
    assert db.identities.get("Ann").name == "Ann"


# ---------------------------------------------------------------- what any client relies on


def test_parameters_accept_exactly_what_their_schema_declares(
    db: ik.Store, ikigai_db_url: str
) -> None:
    """No lax coercion: a number is not read as a date-time, a string not as a number or a
    boolean; seconds are accepted where the schema offers a number (snoozed_until), and
    more seconds than a duration holds are a one-line InvalidArgument, not an internal
    error; a schema offers what the call accepts (no "pending" decision) and a duration's
    default in seconds."""
    db.identities.register("Bob")

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "Ann", "--tools", "full") as ann:
            await call(ann, "whoami")
            base = {"to": ["Bob"], "subject": "s", "body": "b"}
            assert "deadline_at" in await error(ann, "send_mail", {**base, "deadline_at": 12345})
            assert "priority" in await error(ann, "send_mail", {**base, "priority": 1})
            sent = await call(ann, "send_mail", **base, deadline_at="2030-01-01T00:00:00Z")
            assert sent["deadline_at"].startswith("2030-01-01T00:00:00")
            mail = db.mail.send("Bob", "Ann", "snooze me", "x").id
            assert "limit" in await error(ann, "fetch_inbox", {"limit": "10"})
            assert "exclusive" in await error(
                ann, "reserve", {"resource": "r", "ttl": 5, "exclusive": "true"}
            )
            snoozed = await call(
                ann, "set_mail_state", mail_id=mail, state="snoozed", snoozed_until=7200
            )
            assert snoozed["state"] == "snoozed"
            assert "snoozed_until" in await error(
                ann,
                "set_mail_state",
                {"mail_id": mail, "state": "snoozed", "snoozed_until": "7200"},
            )
            for beyond in (1e14, 1e20, -1e20):  # more seconds than a timedelta holds
                told = await error(
                    ann,
                    "set_mail_state",
                    {"mail_id": mail, "state": "snoozed", "snoozed_until": beyond},
                )
                assert told.startswith("InvalidArgument: snoozed_until must be a finite"), told
            listed = {t.name: t for t in (await ann.list_tools()).tools}
            decided = listed["decide_plan"].input_schema["properties"]["state"]
            assert decided["enum"] == ["approved", "rejected", "changes_requested"]
            retention = listed["create_topic"].input_schema["properties"]["retention"]
            assert retention["type"] == "number" and retention["default"] == 7 * 86400

    anyio.run(scenario)


def test_register_keeps_the_servers_identity(db: ik.Store, ikigai_db_url: str) -> None:
    """`register` creates another identity; the server goes on acting as its own (whoami,
    and the sender of later mail)."""
    db.identities.register("Bob")

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "Ann", "--tools", "full") as ann:
            assert (await call(ann, "whoami"))["name"] == "Ann"
            assert (await call(ann, "register", name="Helper"))["name"] == "Helper"
            assert (await call(ann, "whoami"))["name"] == "Ann"
            sent = await call(ann, "send_mail", to="Bob", subject="after", body="b")
            assert sent["sender"] == "Ann"

    anyio.run(scenario)


def test_an_agent_creates_a_task_list_and_a_queue_topic(db: ik.Store, ikigai_db_url: str) -> None:
    """With MCP alone an agent creates a task list (then upserts a task into it) and a queue
    topic (then publishes to it and claims the message)."""

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "Ann", "--tools", "full") as ann:
            made = await call(ann, "create_task_list", list_id="sprint")
            assert made["owner"] == "Ann"
            task = await call(ann, "upsert_task", list_id="sprint", external_id="1", subject="x")
            assert task["subject"] == "x"
            topic = await call(ann, "create_topic", name="builds", kind="queue")
            assert topic["kind"] == "queue"
            await call(ann, "subscribe", topic="builds")
            await call(ann, "publish", topic="builds", subject="build 1", body="go")
            claimed = await call(ann, "claim_message", topic="builds")
            assert claimed["mail"]["subject"] == "build 1"

    anyio.run(scenario)


def test_a_long_call_reports_progress_to_a_client_that_asks(
    db: ik.Store, ikigai_db_url: str
) -> None:
    """wait_for_mail with a progressToken sends progress notifications while it waits; its
    default wait (30 s) stays under the TypeScript SDK's 60 s request timeout."""
    from ikigai_store.mcp.server import PROGRESS_INTERVAL

    by_name = {t.name: t for t in TOOLS}
    assert by_name["wait_for_mail"].input_schema(False)["properties"]["timeout"]["default"] < 60
    seen: list[float] = []

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async def scenario() -> None:
        async with stdio(ikigai_db_url, "--as", "Ann", "--tools", "full") as ann:
            await call(ann, "whoami")
            result = await ann.call_tool(
                "wait_for_mail",
                {"timeout": PROGRESS_INTERVAL + 1.5},
                progress_callback=progressed,
            )
            assert not result.is_error

    anyio.run(scenario)
    assert seen and seen[0] == PROGRESS_INTERVAL


def test_the_stdio_server_exits_on_sigint(db: ik.Store, ikigai_db_url: str) -> None:
    """SIGINT ends a serving stdio server at once (clients stop their servers with it)."""
    import signal

    proc = subprocess.Popen(
        [sys.executable, *server_args(ikigai_db_url, "--as", "Ann")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
            '"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}\n'
        )
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def test_the_server_says_which_database_it_uses(db: ik.Store, ikigai_db_url: str) -> None:
    """The server's instructions name its database (no silent fallback to another one when
    a client starts it with a minimal environment)."""

    async def scenario() -> str:
        env = {k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}
        params = StdioServerParameters(
            command=sys.executable, args=server_args(ikigai_db_url, "--as", "Ann"), env=env
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            result = await session.initialize()
            return result.instructions or ""

    instructions = anyio.run(scenario)
    assert "Database: " in instructions
    assert f"Database: {db.url}." in instructions


def test_a_cancelled_call_keeps_its_connection_quietly(
    db: ik.Store, ikigai_db_url: str, tmp_path: Path
) -> None:
    """A client cancelling a running call (wait_for_mail) gets its query cancelled: the
    pooled connection is kept (no "discarding closed connection"), nothing is logged, and the
    next call works."""
    log = tmp_path / "server.err"

    async def scenario() -> None:
        env = {k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}
        params = StdioServerParameters(
            command=sys.executable,
            args=server_args(ikigai_db_url, "--as", "Ann", "--tools", "full"),
            env=env,
        )
        with log.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await call(session, "whoami")
                for _ in range(3):
                    with anyio.move_on_after(0.5):
                        await session.call_tool("wait_for_mail", {"timeout": 20})
                assert (await call(session, "whoami"))["name"] == "Ann"
                await anyio.sleep(0.5)

    anyio.run(scenario)
    text = log.read_text()
    assert "psycopg" not in text and "discarding" not in text, text
