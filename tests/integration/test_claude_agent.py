"""Claude Agent SDK session transcripts on the store: the SDK's own conformance suite (all 14
contracts, every optional method), and the store's promises (entries are events that search
and replay see, a retried append stores an entry once even when retries race, bad input
writes nothing)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from claude_agent_sdk import InMemorySessionStore
from claude_agent_sdk.testing import run_session_store_conformance

import ikigai_store as ik
from ikigai_store.errors import InvalidArgument
from ikigai_store.integrations.claude_agent import IkigaiSessionStore
from ikigai_store.transcripts import entry_event

pytestmark = [pytest.mark.db]


@pytest_asyncio.fixture
async def astore(ikigai_db_url: str) -> AsyncIterator[ik.AsyncStore]:
    """An AsyncStore on this file's database whose writes are rolled back after the test."""
    store = await ik.AsyncStore.connect(ikigai_db_url, pool_size=2)
    try:
        async with store.transaction(force_rollback=True):
            yield store
    finally:
        await store.close()


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": str(uuid.uuid4()),
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": text},
        **extra,
    }


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": str(uuid.uuid4()),
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
    }


@pytest.mark.asyncio
async def test_passes_the_sdks_session_store_conformance(astore: ik.AsyncStore) -> None:
    """run_session_store_conformance: all 14 contracts, none skipped (every optional method
    is implemented); each contract gets a store of its own namespace."""
    await run_session_store_conformance(
        lambda: IkigaiSessionStore(astore, namespace=f"conformance-{uuid.uuid4()}")
    )


@pytest.mark.asyncio
async def test_the_reference_store_agrees(astore: ik.AsyncStore) -> None:
    """The same appends load equal from our store and from the SDK's reference
    InMemorySessionStore, main and subagent transcripts and summaries alike; a retried batch
    is stored once by ours (the reference, a test double, stores it twice)."""
    ours = IkigaiSessionStore(astore, namespace="agree")
    theirs = InMemorySessionStore()
    main = {"project_key": "p", "session_id": "s"}
    sub = {**main, "subpath": "subagents/agent-1"}
    first = [user("hello"), assistant("hi there")]
    subtask = [user("sub task")]
    for store in (ours, theirs):
        await store.append(main, first)
        await store.append(main, [{"type": "custom-title", "customTitle": "greeting"}])
        await store.append(sub, subtask)
    assert await ours.load(main) == await theirs.load(main)
    await ours.append(main, first)  # a retry: the same uuids
    assert await ours.load(main) == await theirs.load(main)
    assert await ours.load(sub) == await theirs.load(sub)
    assert await ours.list_subkeys(main) == await theirs.list_subkeys(main)
    ours_summaries = await ours.list_session_summaries("p")
    theirs_summaries = await theirs.list_session_summaries("p")
    assert [s["data"] for s in ours_summaries] == [s["data"] for s in theirs_summaries]


@pytest.mark.asyncio
async def test_an_entry_is_stored_once_whatever_its_batch(astore: ik.AsyncStore) -> None:
    """Deduplication by uuid (migration 0041's ikigai_claude_append): a uuid repeated within
    one batch is stored at its first entry; a batch partly stored before stores only its new
    entries; entries without a uuid, or whose uuid is JSON null, are stored every time."""
    store = IkigaiSessionStore(astore, namespace="once")
    key = {"project_key": "p", "session_id": "s"}
    first, second = user("first"), user("second")
    repeated = {**first, "message": {"role": "user", "content": "first, again"}}
    plain = {"type": "custom-title", "customTitle": "no uuid"}
    null_uuid = {**user("null uuid"), "uuid": None}
    await store.append(key, [first, repeated, plain, null_uuid])
    assert await store.load(key) == [first, plain, null_uuid]
    await store.append(key, [first, second, plain, null_uuid, second])
    assert await store.load(key) == [first, plain, null_uuid, second, plain, null_uuid]


@pytest.mark.asyncio
async def test_transcripts_are_sessions_search_and_replay_see(astore: ik.AsyncStore) -> None:
    """A mirrored transcript is a session of ours: its entries are events with kinds and text,
    found by search and shown by replay in order."""
    store = IkigaiSessionStore(astore, namespace="visible")
    key = {"project_key": "p", "session_id": "visible-session"}
    tool_result = user(
        "",
        message={
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "marmalade jam, then toast"}
            ],
        },
    )
    await store.append(key, [user("find the marmalade recipe"), assistant("Looking."), tool_result])
    hits = await astore.search("marmalade")
    assert {h.message.content for h in hits} == {
        "find the marmalade recipe",
        "marmalade jam, then toast",
    }
    session_id = hits[0].message.session_id
    replayed = await astore.replay_session(session_id)
    assert [m.kind for m in replayed.messages] == ["user", "assistant", "tool_result"]
    assert [m.data for m in replayed.messages] == await store.load(key)


def test_entry_kinds() -> None:
    """entry_event: user, assistant, tool calls and results, system, and the runtime's own
    records as commands."""
    assert entry_event(user("hi")) == ("user", "hi")
    assert entry_event(assistant("yo")) == ("assistant", "yo")
    call = {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash"}]}}
    assert entry_event(call) == ("tool_call", None)
    assert entry_event({"type": "system", "content": "compacted"}) == ("system", "compacted")
    assert entry_event({"type": "custom-title", "customTitle": "x"}) == ("command", None)


@pytest.mark.asyncio
async def test_racing_retries_store_an_entry_once(ikigai_db_url: str) -> None:
    """Five concurrent appends of one batch (the SDK retrying while the first is in flight),
    on five connections, store each entry once, in order (committed writes)."""
    stores = [await ik.AsyncStore.connect(ikigai_db_url, pool_size=1) for _ in range(5)]
    try:
        namespace = f"race-{uuid.uuid4()}"
        key = {"project_key": "p", "session_id": "raced"}
        batch = [user(f"message {i}") for i in range(20)]
        await asyncio.gather(
            *(IkigaiSessionStore(s, namespace=namespace).append(key, batch) for s in stores)
        )
        assert await IkigaiSessionStore(stores[0], namespace=namespace).load(key) == batch
    finally:
        for s in stores:
            await s.close()


@pytest.mark.asyncio
async def test_bad_input_writes_nothing(astore: ik.AsyncStore) -> None:
    """A non-object entry, a NUL in an entry, an empty subpath and a missing session id raise
    InvalidArgument and store nothing."""
    store = IkigaiSessionStore(astore, namespace="bad")
    key = {"project_key": "p", "session_id": "s"}
    with pytest.raises(InvalidArgument, match=r"entries\[1\]"):
        await store.append(key, [user("fine"), "not an object"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument, match="NUL"):
        await store.append(key, [user("nul \x00 here")])
    with pytest.raises(InvalidArgument, match="subpath"):
        await store.append({**key, "subpath": ""}, [user("x")])
    with pytest.raises(InvalidArgument, match="session_id"):
        await store.append({"project_key": "p"}, [user("x")])  # type: ignore[typeddict-item]
    assert await store.load(key) is None
    assert await store.list_sessions("p") == []


@pytest.mark.asyncio
async def test_an_ended_session_refuses_appends(astore: ik.AsyncStore) -> None:
    """A transcript whose session someone ended takes no more entries: InvalidArgument, and
    neither the entries nor the modification time change."""
    store = IkigaiSessionStore(astore, namespace="ended")
    key = {"project_key": "p", "session_id": "s"}
    first = [user("quince jelly")]
    await store.append(key, first)
    before = await store.list_sessions("p")
    hits = await astore.search("quince")
    await astore.end_session(hits[0].message.session_id)
    with pytest.raises(InvalidArgument, match=r"transcript 's' is stored in session \d+, which"):
        await store.append(key, [user("more")])
    assert await store.load(key) == first
    assert await store.list_sessions("p") == before


@pytest.mark.asyncio
async def test_a_transcript_is_never_the_active_session(astore: ik.AsyncStore) -> None:
    """A transcript's session stays open, but another writer's "active session" is never it."""
    store = IkigaiSessionStore(astore, namespace="not-active")
    await store.append({"project_key": "p", "session_id": "t"}, [user("hello")])
    (newest,) = await astore.list_sessions(limit=1)
    assert newest.ended_at is None
    assert await astore.get_active_session() != newest.id
