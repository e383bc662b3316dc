"""OpenAI Agents SDK sessions on the store: what the SDK's own session tests ask of a session
(order, limits, pop, clear, isolation, concurrency, unicode, large items), the store's promises
(one statement per add_items and per get_items, history kept by pop and clear), and a real
``Runner`` over the SDK's scripted model across two runs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import pytest_asyncio

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner
from agents.memory import Session, SessionSettings
from agents.testing import ScriptedModel, assistant_message

import ikigai_store as ik
from ikigai_store import ops
from ikigai_store.integrations.openai_agents import (
    NAMESPACE,
    IkigaiStoreSession,
    item_event,
)

pytestmark = [pytest.mark.db]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def contents(items: list[Any]) -> list[Any]:
    return [item.get("content") for item in items]


@contextmanager
def counting_statements() -> Iterator[list[str]]:
    """The names of the queries run meanwhile (every call an operation makes goes through
    ``ops.aexecute``: one call, one statement, one round trip)."""
    seen: list[str] = []
    real = ops.aexecute

    async def counted(conn: Any, call: ops.Call) -> Any:
        seen.append(call.name)
        return await real(conn, call)

    ops.aexecute = counted  # type: ignore[assignment]
    try:
        yield seen
    finally:
        ops.aexecute = real  # type: ignore[assignment]


@pytest_asyncio.fixture
async def committed_store(ikigai_db_url: str) -> AsyncIterator[ik.AsyncStore]:
    """An AsyncStore whose writes commit (several connections: concurrency)."""
    store = await ik.AsyncStore.connect(ikigai_db_url, pool_size=8)
    try:
        yield store
    finally:
        await store.close()


def key() -> str:
    return f"sdk-{uuid.uuid4()}"


@pytest.mark.asyncio
async def test_is_an_sdk_session(ikigai_async_store: ik.AsyncStore) -> None:
    """IkigaiStoreSession satisfies the SDK's runtime-checkable Session protocol."""
    session = await IkigaiStoreSession.open(key(), ikigai_async_store)
    assert isinstance(session, Session)
    assert session.session_settings is None


@pytest.mark.asyncio
async def test_items_come_back_whole_and_in_order(ikigai_async_store: ik.AsyncStore) -> None:
    """Items are returned exactly as added, in order: unicode, quotes and SQL, nested parts,
    tool calls, and a 1 MB item; each is stored as an event with a kind and its text."""
    store = ikigai_async_store
    session = await IkigaiStoreSession.open(key(), store)
    big = "x" * 1_000_000
    items: list[Any] = [
        user("こんにちは"),
        assistant("😊👍 Привет"),
        user("O'Reilly \"quoted\" Robert'); DROP TABLE messages;-- %s %%"),
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "part one", "annotations": []}],
        },
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "result"},
        {"role": "system", "content": "be brief"},
        user(big),
    ]
    await session.add_items(items)
    assert await session.get_items() == items
    stored = await store.messages(session.ikigai_session_id)
    assert [(m.kind, m.content) for m in stored[:7]] == [
        ("user", "こんにちは"),
        ("assistant", "😊👍 Привет"),
        ("user", items[2]["content"]),
        ("assistant", "part one"),
        ("tool_call", '{"a": 1}'),
        ("tool_result", "result"),
        ("system", "be brief"),
    ]
    assert [m.data for m in stored] == items
    assert [h.message.id for h in await store.search("Привет")] == [stored[1].id]


@pytest.mark.asyncio
async def test_get_items_limit(ikigai_async_store: ik.AsyncStore) -> None:
    """limit returns the newest N in order; more than there are returns all; 0 none; a
    negative limit all (as the SDK's SQLite session); session_settings.limit is the default
    and an explicit limit overrides it."""
    session = await IkigaiStoreSession.open(key(), ikigai_async_store)
    items = [user(f"m{i}") if i % 2 == 0 else assistant(f"r{i}") for i in range(6)]
    await session.add_items(items)
    assert await session.get_items(limit=2) == items[-2:]
    assert await session.get_items(limit=4) == items[-4:]
    assert await session.get_items(limit=10) == items
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=-1) == items
    limited = IkigaiStoreSession(
        session.session_id,
        ikigai_async_store,
        ikigai_session_id=session.ikigai_session_id,
        session_settings={"limit": 3},
    )
    assert isinstance(limited.session_settings, SessionSettings)
    assert await limited.get_items() == items[-3:]
    assert await limited.get_items(limit=5) == items[-5:]


@pytest.mark.asyncio
async def test_pop_item_removes_from_the_context_and_keeps_history(
    ikigai_async_store: ik.AsyncStore,
) -> None:
    """pop_item returns the newest items one by one, then None; an empty pop writes nothing;
    every popped item stays in history, with a pop event aimed at it."""
    store = ikigai_async_store
    session = await IkigaiStoreSession.open(key(), store)
    sid = session.ikigai_session_id
    assert await session.pop_item() is None
    assert await store.count_messages(sid) == 0
    items = [user("Hello"), assistant("Hi there!"), user("How are you?")]
    await session.add_items(items)
    assert await session.pop_item() == items[2]
    assert await session.get_items() == items[:2]
    assert await session.pop_item() == items[1]
    assert await session.pop_item() == items[0]
    assert await session.pop_item() is None
    assert await session.get_items() == []
    history = await store.messages(sid)
    assert [m.kind for m in history] == ["user", "assistant", "user", "pop", "pop", "pop"]
    assert [m.data["target_message_id"] for m in history[3:]] == [m.id for m in history[2::-1]]
    assert (await store.replay_session(sid)).messages == []
    await session.add_items([user("again")])
    assert await session.get_items() == [user("again")]


@pytest.mark.asyncio
async def test_pop_item_skips_events_that_are_not_items(
    ikigai_async_store: ik.AsyncStore,
) -> None:
    """Events newer than the newest item that are not items (a mark, another writer's
    record) stay in the context: only the item is popped, and a rewind to the mark works."""
    store = ikigai_async_store
    session = await IkigaiStoreSession.open(key(), store)
    sid = session.ikigai_session_id
    await session.add_items([user("a"), assistant("b")])
    mark = await store.append(sid, "mark", "cp", {"label": "cp"})
    usage = await store.append(sid, "usage", None, {"tokens": 12})
    assert await session.get_items() == [user("a"), assistant("b")]
    assert await session.pop_item() == assistant("b")
    context = await store.replay_session(sid)
    assert [m.id for m in context.messages][-2:] == [mark.id, usage.id]
    assert [m.message_id for m in context.marks] == [mark.id]
    assert await session.get_items() == [user("a")]
    assert await session.pop_item() == user("a")
    assert await session.pop_item() is None  # only non-items left: nothing written
    assert [m.kind for m in (await store.replay_session(sid)).messages] == ["mark", "usage"]
    assert [m.kind for m in await store.messages(sid)][-2:] == ["pop", "pop"]


@pytest.mark.asyncio
async def test_concurrent_pop_items_remove_different_items(ikigai_db_url: str) -> None:
    """Eight sessions over one SDK session, each on its own connection, pop at once: each
    item is returned once, and the context ends empty."""
    stores = [await ik.AsyncStore.connect(ikigai_db_url, pool_size=1) for _ in range(8)]
    try:
        name = key()
        first = await IkigaiStoreSession.open(name, stores[0])
        items = [user(f"item {k}") for k in range(8)]
        await first.add_items(items)
        sessions = [await IkigaiStoreSession.open(name, s) for s in stores]
        popped = await asyncio.gather(*(s.pop_item() for s in sessions))
        assert sorted(p["content"] for p in popped) == sorted(i["content"] for i in items)
        assert await first.get_items() == []
    finally:
        for s in stores:
            await s.close()


@pytest.mark.asyncio
async def test_clear_session_empties_the_context_and_keeps_history(
    ikigai_async_store: ik.AsyncStore,
) -> None:
    """clear_session is a clear event: no items afterwards, history intact, new items after."""
    store = ikigai_async_store
    session = await IkigaiStoreSession.open(key(), store)
    await session.add_items([user("Hello"), assistant("Hi there!")])
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    history = await store.messages(session.ikigai_session_id)
    assert [m.kind for m in history] == ["user", "assistant", "clear"]
    await session.add_items([user("after")])
    assert await session.get_items() == [user("after")]


@pytest.mark.asyncio
async def test_sessions_are_isolated_and_keys_stable(ikigai_async_store: ik.AsyncStore) -> None:
    """Different SDK session ids are different sessions: adds, pops and clears of one leave
    the other alone; the same id opens the same session again."""
    store = ikigai_async_store
    first, second = key(), key()
    a = await IkigaiStoreSession.open(first, store)
    b = await IkigaiStoreSession.open(second, store, title="second")
    assert a.ikigai_session_id != b.ikigai_session_id
    assert (await store.get_session(a.ikigai_session_id)).title == first
    assert (await store.get_session(b.ikigai_session_id)).title == "second"
    await a.add_items([user("a1"), assistant("a2")])
    await b.add_items([user("b1"), assistant("b2")])
    assert await a.pop_item() == assistant("a2")
    await b.clear_session()
    assert await a.get_items() == [user("a1")]
    assert await b.get_items() == []
    again = await IkigaiStoreSession.open(first, store)
    assert again.ikigai_session_id == a.ikigai_session_id
    assert await again.get_items() == [user("a1")]
    assert await store.session_for_key(NAMESPACE, first) == a.ikigai_session_id


@pytest.mark.asyncio
async def test_add_and_get_are_one_statement_each(ikigai_async_store: ik.AsyncStore) -> None:
    """add_items of 10 items is one statement (append_events); get_items, with or without a
    limit, is one (session_replay_tail)."""
    session = await IkigaiStoreSession.open(key(), ikigai_async_store)
    with counting_statements() as seen:
        await session.add_items([user(f"m{i}") for i in range(10)])
    assert seen == ["append_events"]
    with counting_statements() as seen:
        assert len(await session.get_items(limit=5)) == 5
        assert len(await session.get_items()) == 10
    assert seen == ["session_replay_tail", "session_replay_tail"]


@pytest.mark.asyncio
async def test_add_items_is_all_or_nothing(ikigai_async_store: ik.AsyncStore) -> None:
    """An item the store cannot hold (a NUL character) fails the whole add; an ended session
    takes none."""
    store = ikigai_async_store
    session = await IkigaiStoreSession.open(key(), store)
    with pytest.raises(ik.InvalidArgument):
        await session.add_items([user("fine"), user("bad \x00")])
    assert await store.count_messages(session.ikigai_session_id) == 0
    await store.end_session(session.ikigai_session_id)
    with pytest.raises(ik.InvalidArgument, match="has ended"):
        await session.add_items([user("late")])
    assert await session.pop_item() is None


@pytest.mark.asyncio
async def test_agent_sessions_replay_the_lineage(ikigai_async_store: ik.AsyncStore) -> None:
    """for_agent keeps items as the agent's events; a fork's session sees what it inherited;
    pop and clear act on that agent's context only."""
    store = ikigai_async_store
    sid = await store.create_session()
    parent = await store.create_agent(sid)
    ps = await IkigaiStoreSession.for_agent(store, parent.uuid)
    assert ps.session_id == parent.uuid
    await ps.add_items([user("p1"), assistant("p2")])
    assert all(m.agent_uuid == parent.uuid for m in await store.messages(sid))
    child = await store.fork_agent(parent.uuid)
    cs = await IkigaiStoreSession.for_agent(store, child.uuid, session_id="child")
    await cs.add_items([user("c1")])
    assert await cs.get_items() == [user("p1"), assistant("p2"), user("c1")]
    assert await cs.get_items(limit=2) == [assistant("p2"), user("c1")]
    assert await cs.pop_item() == user("c1")
    assert await cs.pop_item() == assistant("p2")  # inherited: popped from the child's view
    assert await ps.get_items() == [user("p1"), assistant("p2")]
    await cs.clear_session()
    assert await cs.get_items() == []
    assert await ps.get_items() == [user("p1"), assistant("p2")]
    await store.kill_agent(child.uuid)
    with pytest.raises(ik.InvalidArgument):
        await cs.add_items([user("dead")])


@pytest.mark.asyncio
async def test_runner_keeps_the_conversation_across_runs(
    ikigai_async_store: ik.AsyncStore,
) -> None:
    """Runner.run with the session: the second run's model input holds the first run's
    question and answer, and the session holds both turns."""
    session = await IkigaiStoreSession.open(key(), ikigai_async_store)
    model = ScriptedModel([[assistant_message("San Francisco")], [assistant_message("California")]])
    agent = Agent(name="test", model=model)
    config = RunConfig(tracing_disabled=True)
    first = await Runner.run(agent, "Which city?", session=session, run_config=config)
    assert first.final_output == "San Francisco"
    second = await Runner.run(agent, "Which state?", session=session, run_config=config)
    assert second.final_output == "California"
    last_input = model.calls[-1].input
    assert isinstance(last_input, list)
    texts = [str(item) for item in last_input]
    assert "Which city?" in texts[0] and "San Francisco" in texts[1] and "Which state?" in texts[2]
    items = await session.get_items()
    assert [item.get("role") for item in items] == ["user", "assistant", "user", "assistant"]
    assert "California" in str(items[-1])
    model.assert_complete()


@pytest.mark.asyncio
async def test_runner_session_limit_zero(ikigai_async_store: ik.AsyncStore) -> None:
    """With RunConfig(session_settings=SessionSettings(limit=0)) the model sees only the new
    input."""
    session = await IkigaiStoreSession.open(key(), ikigai_async_store)
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]])
    agent = Agent(name="test", model=model)
    await Runner.run(agent, "first", session=session, run_config=RunConfig(tracing_disabled=True))
    config = RunConfig(tracing_disabled=True, session_settings=SessionSettings(limit=0))
    await Runner.run(agent, "second", session=session, run_config=config)
    last_input = model.calls[-1].input
    assert isinstance(last_input, list) and len(last_input) == 1
    assert len(await session.get_items()) == 4


@pytest.mark.asyncio
async def test_concurrent_use(committed_store: ik.AsyncStore) -> None:
    """Concurrent first opens of one key find one session; concurrent add_items all land,
    each call's items consecutive; concurrent pops each remove a different item."""
    store = committed_store
    name = key()
    opened = await asyncio.gather(*(IkigaiStoreSession.open(name, store) for _ in range(6)))
    assert len({s.ikigai_session_id for s in opened}) == 1
    batches = [[user(f"m{i}-{j}") for j in range(3)] for i in range(10)]
    await asyncio.gather(*(s.add_items(b) for s, b in zip(opened * 2, batches, strict=False)))
    items = await opened[0].get_items()
    assert sorted(contents(items)) == sorted(contents([i for b in batches for i in b]))
    for batch in batches:
        at = items.index(batch[0])
        assert items[at : at + 3] == batch
    popped = await asyncio.gather(*(s.pop_item() for s in opened * 2))
    assert all(p is not None for p in popped)
    assert len({p["content"] for p in popped if p is not None}) == 12
    assert popped_are_the_newest(items, popped)
    assert await opened[0].get_items() == items[:-12]


def popped_are_the_newest(items: list[Any], popped: list[Any]) -> bool:
    return sorted(contents(popped)) == sorted(contents(items[-len(popped) :]))


def test_item_event_kinds() -> None:
    """Items map to kinds by role and type; the data is the item itself."""
    cases: list[tuple[dict[str, Any], str]] = [
        (user("u"), "user"),
        (assistant("a"), "assistant"),
        ({"role": "developer", "content": "d"}, "system"),
        ({"type": "function_call", "arguments": "{}"}, "tool_call"),
        ({"type": "computer_call_output", "output": {}}, "tool_result"),
        ({"type": "reasoning", "summary": []}, "assistant"),
    ]
    for item, kind in cases:
        assert item_event(item)[0] == kind
        assert item_event(item)[2] == item


def test_importing_the_store_does_not_import_the_sdk() -> None:
    """The SDK is an optional extra: ``import ikigai_store`` (and the integrations package)
    never imports it; the integration module imports it only for SessionSettings dicts."""
    code = (
        "import sys, ikigai_store, ikigai_store.integrations.openai_agents\n"
        "print('agents' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr
