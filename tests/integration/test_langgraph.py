"""LangGraph checkpoint savers on the store: LangGraph's own conformance suite (all 8
capabilities, both savers), the store's promises (a copy is one row, an appended message is
stored alone, a thread is read in one statement at any depth of copies) and a real
``StateGraph`` (messages, interrupt and resume, time travel, isolated threads)."""

from __future__ import annotations

import operator
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypedDict

import pytest
import pytest_asyncio
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

import ikigai_store as ik
from ikigai_store import migrate, ops
from ikigai_store.errors import Conflict, InvalidArgument
from ikigai_store.integrations.langgraph import AsyncIkigaiSaver, IkigaiSaver
from ikigai_store.testing import drop_test_database, fresh_database, test_database_name

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


@pytest.fixture
def store(ikigai_module_store: ik.Store) -> Iterator[ik.Store]:
    """A Store on this file's database whose writes are rolled back after the test."""
    with ikigai_module_store.transaction(force_rollback=True):
        yield ikigai_module_store


@contextmanager
def counting_statements() -> Iterator[list[str]]:
    """The names of the queries run meanwhile, on either face (one call, one round trip)."""
    seen: list[str] = []
    real, areal = ops.execute, ops.aexecute

    def counted(conn: Any, call: ops.Call) -> Any:
        seen.append(call.name)
        return real(conn, call)

    async def acounted(conn: Any, call: ops.Call) -> Any:
        seen.append(call.name)
        return await areal(conn, call)

    ops.execute, ops.aexecute = counted, acounted  # type: ignore[assignment]
    try:
        yield seen
    finally:
        ops.execute, ops.aexecute = real, areal  # type: ignore[assignment]


def _assert_all_passed(report: Any) -> None:
    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == {c.value for c in ALL_CAPABILITIES}, report.results
    failures = {n: r.failures for n, r in report.results.items() if not r.passed}
    assert not failures, failures


# ---------------------------------------------------------------- LangGraph's conformance suite


@pytest.mark.asyncio
async def test_async_saver_passes_langgraph_conformance(astore: ik.AsyncStore) -> None:
    """AsyncIkigaiSaver: all 8 capabilities of langgraph-checkpoint-conformance detected and
    passing (each suite on a fresh saver in a transaction of its own)."""

    @checkpointer_test(name="AsyncIkigaiSaver")
    async def factory() -> AsyncIterator[AsyncIkigaiSaver]:
        async with astore.transaction(force_rollback=True):
            yield AsyncIkigaiSaver(astore)

    _assert_all_passed(await validate(factory))


@pytest.mark.asyncio
async def test_sync_saver_passes_langgraph_conformance(store: ik.Store) -> None:
    """IkigaiSaver (the sync saver, its async methods in worker threads): all 8 capabilities
    detected and passing."""

    @checkpointer_test(name="IkigaiSaver")
    async def factory() -> AsyncIterator[IkigaiSaver]:
        with store.transaction(force_rollback=True):
            yield IkigaiSaver(store)

    _assert_all_passed(await validate(factory))


# ---------------------------------------------------------------- the store's promises


def _rows(store: ik.Store) -> dict[str, int]:
    """How many rows each LangGraph table holds (inside the test's transaction)."""
    counts = {}
    with store._connection() as conn:
        for table in ("threads", "checkpoints", "blobs", "writes"):
            row = conn.execute(f"SELECT count(*) AS n FROM langgraph_{table}").fetchone()
            counts[table] = int(row["n"])
    return counts


def _steps(saver: IkigaiSaver, thread_id: str, n: int, *, start: Any = None) -> Any:
    """Put ``n`` checkpoints on a thread, each adding one message to a messages channel the way
    LangGraph does (a new list with one more item, its version bumped); returns the last
    config and the messages."""
    config: Any = start or {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    messages: list[Any] = []
    version: str | None = None
    tup = saver.get_tuple(config)
    if tup is not None:
        messages = list(tup.checkpoint["channel_values"]["messages"])
        version = tup.checkpoint["channel_versions"]["messages"]
    for i in range(n):
        messages = [*messages, HumanMessage(f"message {len(messages)}", id=str(uuid.uuid4()))]
        version = saver.get_next_version(version, None)
        checkpoint = {
            "v": 4,
            "id": _uuid6(),
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": {"messages": messages, "step": i},
            "channel_versions": {"messages": version, "step": version},
            "versions_seen": {},
            "updated_channels": ["messages"],
        }
        config = saver.put(config, checkpoint, {"source": "loop", "step": i}, {"messages": version})
    return config, messages


def _uuid6() -> str:
    from langgraph.checkpoint.base.id import uuid6

    return str(uuid6())


def test_a_step_stores_only_the_appended_message(store: ik.Store) -> None:
    """Appending one message to a 300-message state stores one small blob (an append on the
    previous version), and a fresh saver (no cache) rebuilds the whole list from the chain."""
    saver = IkigaiSaver(store, max_appends=1_000)
    config, messages = _steps(saver, "long", 300)
    with store._connection() as conn:
        rows = conn.execute(
            "SELECT base_version, length(blob) AS size FROM langgraph_blobs ORDER BY id"
        ).fetchall()
    assert rows[0]["base_version"] is None  # the first value is whole
    assert all(r["base_version"] is not None for r in rows[1:])  # every later one an append
    assert max(r["size"] for r in rows[1:]) < 400  # one message each, not the whole list
    cold = IkigaiSaver(store).get_tuple(config)
    assert cold is not None
    assert cold.checkpoint["channel_values"]["messages"] == messages


def test_appends_restart_whole_after_max_appends(store: ik.Store) -> None:
    """With max_appends=8, every 9th value of the channel is stored whole: a cold read folds
    at most 8 appends, and still rebuilds the list exactly."""
    saver = IkigaiSaver(store, max_appends=8)
    config, messages = _steps(saver, "bounded", 40)
    with store._connection() as conn:
        bases = [
            r["base_version"]
            for r in conn.execute("SELECT base_version FROM langgraph_blobs ORDER BY id")
        ]
    whole = [i for i, base in enumerate(bases) if base is None]
    assert whole == [0, 9, 18, 27, 36]
    cold = IkigaiSaver(store).get_tuple(config)
    assert cold is not None
    assert cold.checkpoint["channel_values"]["messages"] == messages


def test_get_tuple_is_one_statement_through_copies(store: ik.Store) -> None:
    """A copy of a copy is read in one statement, sees its sources' checkpoints up to when it
    was made, and not what they got later."""
    saver = IkigaiSaver(store)
    _, first = _steps(saver, "a", 3)
    saver.copy_thread("a", "b")
    _steps(saver, "a", 2)  # later steps of the source: not in the copy
    _, second = _steps(saver, "b", 2)
    saver.copy_thread("b", "c")
    fresh = IkigaiSaver(store)
    with counting_statements() as seen:
        tup = fresh.get_tuple({"configurable": {"thread_id": "c", "checkpoint_ns": ""}})
    assert seen == ["langgraph_get"]
    assert tup is not None
    assert tup.checkpoint["channel_values"]["messages"] == second
    assert second[:3] == first
    assert len(list(fresh.list({"configurable": {"thread_id": "c", "checkpoint_ns": ""}}))) == 5
    assert len(list(fresh.list({"configurable": {"thread_id": "a", "checkpoint_ns": ""}}))) == 5


def test_copy_thread_writes_one_row(store: ik.Store) -> None:
    """copy_thread of a 50-step thread adds one thread row and copies no checkpoint, blob or
    write; deleting the source afterwards leaves the copy whole."""
    saver = IkigaiSaver(store)
    config, messages = _steps(saver, "src", 50)
    saver.put_writes(config, [("messages", "pending")], "task-1")
    before = _rows(store)
    saver.copy_thread("src", "dst")
    after = _rows(store)
    assert after == {**before, "threads": before["threads"] + 1}
    saver.delete_thread("src")
    assert saver.get_tuple({"configurable": {"thread_id": "src", "checkpoint_ns": ""}}) is None
    tup = IkigaiSaver(store).get_tuple({"configurable": {"thread_id": "dst", "checkpoint_ns": ""}})
    assert tup is not None
    assert tup.checkpoint["channel_values"]["messages"] == messages
    assert [w[1:] for w in tup.pending_writes or []] == [("messages", "pending")]


def test_a_copy_keeps_an_inherited_write_as_a_thread_keeps_its_own(store: ik.Store) -> None:
    """A copy holds its source's writes as they were when it was made: a plain write put
    again under the same task and idx keeps the first (the inherited one, on the copy), a
    special (error) write put again replaces the thread's own, and neither reaches the other
    thread, the other way round too (a copy of a copy included)."""
    saver = IkigaiSaver(store)
    config, _ = _steps(saver, "src", 1)
    saver.put_writes(config, [("messages", "first")], "task-1")
    saver.put_writes(config, [("__error__", "boom")], "task-2")
    saver.copy_thread("src", "dst")
    saver.copy_thread("dst", "deep")
    at = {"configurable": {**config["configurable"], "thread_id": "dst"}}
    saver.put_writes(at, [("messages", "second")], "task-1")
    saver.put_writes(at, [("__error__", "again")], "task-2")
    saver.put_writes(config, [("__error__", "later")], "task-2")
    expected = {
        "src": [("task-1", "messages", "first"), ("task-2", "__error__", "later")],
        "dst": [("task-1", "messages", "first"), ("task-2", "__error__", "again")],
        "deep": [("task-1", "messages", "first"), ("task-2", "__error__", "boom")],
    }
    for fresh in (saver, IkigaiSaver(store)):
        for thread, writes in expected.items():
            where: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            tup = fresh.get_tuple(where)
            assert tup is not None
            assert sorted(tup.pending_writes or []) == writes, thread
            (listed,) = fresh.list(where)
            assert sorted(listed.pending_writes or []) == writes, thread


def test_prune_a_copy_leaves_its_source(store: ik.Store) -> None:
    """prune(keep_latest) on a copy keeps its newest checkpoint (values rebuilt whole) and does
    not touch the source it was copied from."""
    saver = IkigaiSaver(store)
    _steps(saver, "src", 5)
    saver.copy_thread("src", "dst")
    config, messages = _steps(saver, "dst", 2)
    saver.prune(["dst"])
    listed = list(saver.list({"configurable": {"thread_id": "dst", "checkpoint_ns": ""}}))
    assert [t.config["configurable"]["checkpoint_id"] for t in listed] == [
        config["configurable"]["checkpoint_id"]
    ]
    fresh = IkigaiSaver(store).get_tuple(config)
    assert fresh is not None
    assert fresh.checkpoint["channel_values"]["messages"] == messages
    assert len(list(saver.list({"configurable": {"thread_id": "src", "checkpoint_ns": ""}}))) == 5


def test_bad_input_writes_nothing(store: ik.Store) -> None:
    """A config without a thread id, a NUL in a key, a copy onto an existing thread and an
    unknown prune strategy raise the store's errors and write nothing."""
    saver = IkigaiSaver(store)
    _steps(saver, "x", 1)
    before = _rows(store)
    checkpoint: Any = {
        "v": 4,
        "id": _uuid6(),
        "ts": "",
        "channel_values": {},
        "channel_versions": {},
        "versions_seen": {},
    }
    with pytest.raises(InvalidArgument, match="thread_id"):
        saver.put({"configurable": {}}, checkpoint, {}, {})
    with pytest.raises(InvalidArgument, match="NUL"):
        saver.put({"configurable": {"thread_id": "a\x00b"}}, checkpoint, {}, {})
    _steps(saver, "y", 1)
    with pytest.raises(Conflict, match="thread 'y' already exists"):
        saver.copy_thread("x", "y")
    with pytest.raises(InvalidArgument, match="strategy"):
        saver.prune(["x"], strategy="keep_some")
    after = _rows(store)
    assert after["checkpoints"] == before["checkpoints"] + 1  # y's own, nothing else
    assert after["threads"] == before["threads"] + 1


# ---------------------------------------------------------------- a real StateGraph


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: Annotated[int, operator.add]


def _assistant(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(f"echo: {last.content}")], "turns": 1}


def _review(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "send it?", "draft": state["messages"][-1].content})
    return {"messages": [AIMessage(f"reviewed: {answer}")]}


def _graph(saver: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("assistant", _assistant)
    builder.add_node("review", _review)
    builder.add_edge(START, "assistant")
    builder.add_edge("assistant", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver)


def _texts(state: Any) -> list[str]:
    return [m.content for m in state.values["messages"]]


def test_state_graph_interrupt_resume_time_travel_and_threads(
    ikigai_module_store: ik.Store,
) -> None:
    """A StateGraph on IkigaiSaver: it stops at the interrupt and resumes from the store (a
    fresh graph and saver), time travel forks a past checkpoint with update_state and goes on
    from the fork without touching the first branch, and two threads never see each other.
    (Committed writes: LangGraph writes from several threads at once, which a test's single
    rolled-back transaction cannot take.)"""
    store = ikigai_module_store
    one = {"configurable": {"thread_id": f"one-{uuid.uuid4()}"}}
    two = {"configurable": {"thread_id": f"two-{uuid.uuid4()}"}}
    graph = _graph(IkigaiSaver(store))
    result = graph.invoke({"messages": [HumanMessage("hello")]}, one)
    assert result["__interrupt__"][0].value == {"question": "send it?", "draft": "echo: hello"}
    assert graph.get_state(one).next == ("review",)

    graph.invoke({"messages": [HumanMessage("other thread")]}, two)
    resumed = _graph(IkigaiSaver(store))  # a new process would see the same: all in the store
    resumed.invoke(Command(resume="yes"), one)
    assert _texts(resumed.get_state(one)) == ["hello", "echo: hello", "reviewed: yes"]
    assert resumed.get_state(one).values["turns"] == 1
    assert _texts(resumed.get_state(two)) == ["other thread", "echo: other thread"]

    history = list(resumed.get_state_history(one))
    assert [s.next for s in history][:3] == [(), ("review",), ("assistant",)]
    before_review = next(s for s in history if s.next == ("review",))
    fork = resumed.update_state(
        before_review.config, {"messages": [AIMessage("edited draft")]}, as_node="assistant"
    )
    assert (
        fork["configurable"]["checkpoint_id"]
        != before_review.config["configurable"]["checkpoint_id"]
    )
    again = resumed.invoke(None, fork)
    assert again["__interrupt__"][0].value["draft"] == "edited draft"
    resumed.invoke(Command(resume="no"), fork)
    latest = resumed.get_state(one)
    assert _texts(latest) == ["hello", "echo: hello", "edited draft", "reviewed: no"]
    # the first branch is still there, one step before the fork point's children
    first_branch = resumed.get_state(history[0].config)
    assert _texts(first_branch) == ["hello", "echo: hello", "reviewed: yes"]
    assert _texts(resumed.get_state(two)) == ["other thread", "echo: other thread"]
    ids = [s.config["configurable"]["checkpoint_id"] for s in resumed.get_state_history(one)]
    assert len(ids) == len(history) + 2  # the update_state, then the resumed review
    assert {s.config["configurable"]["checkpoint_id"] for s in history} <= set(ids)


@pytest.mark.asyncio
async def test_async_state_graph_resumes_and_forks(ikigai_db_url: str) -> None:
    """The same graph on AsyncIkigaiSaver (ainvoke, aget_state, aupdate_state): interrupt and
    resume, a fork of a past checkpoint, and copy_thread of a running conversation (committed
    writes, as above)."""
    astore = await ik.AsyncStore.connect(ikigai_db_url, pool_size=4)
    try:
        await _async_scenario(astore, f"async-{uuid.uuid4()}")
    finally:
        await astore.close()


async def _async_scenario(astore: ik.AsyncStore, thread: str) -> None:
    config = {"configurable": {"thread_id": thread}}
    graph = _graph(AsyncIkigaiSaver(astore))
    await graph.ainvoke({"messages": [HumanMessage("hi")]}, config)
    await graph.ainvoke(Command(resume="ok"), config)
    state = await graph.aget_state(config)
    assert _texts(state) == ["hi", "echo: hi", "reviewed: ok"]
    await graph.checkpointer.acopy_thread(thread, f"{thread}-copy")
    copy = {"configurable": {"thread_id": f"{thread}-copy"}}
    await graph.ainvoke({"messages": [HumanMessage("more")]}, copy)
    await graph.ainvoke(Command(resume="fine"), copy)
    assert _texts(await graph.aget_state(copy)) == [
        "hi",
        "echo: hi",
        "reviewed: ok",
        "more",
        "echo: more",
        "reviewed: fine",
    ]
    assert _texts(await graph.aget_state(config)) == ["hi", "echo: hi", "reviewed: ok"]
    past = [s async for s in graph.aget_state_history(config) if s.next == ("review",)].pop()
    fork = await graph.aupdate_state(
        past.config, {"messages": [AIMessage("v2")]}, as_node="assistant"
    )
    await graph.ainvoke(None, fork)
    await graph.ainvoke(Command(resume="sure"), fork)
    assert _texts(await graph.aget_state(config)) == ["hi", "echo: hi", "v2", "reviewed: sure"]


def test_an_append_whose_base_is_gone_is_stored_whole(store: ik.Store) -> None:
    """A saver whose cache predates another saver's delete_thread still stores the thread
    right: its append's base is not in the re-made thread, so the value is stored whole."""
    first, other = IkigaiSaver(store), IkigaiSaver(store)
    _, messages = _steps(first, "gone", 3)
    other.delete_thread("gone")
    messages = [*messages, HumanMessage("after the delete", id="after")]
    checkpoint: Any = {
        "v": 4,
        "id": _uuid6(),
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"messages": messages},
        "channel_versions": {"messages": "9" * 32 + ".0"},
        "versions_seen": {},
    }
    first.put(
        {"configurable": {"thread_id": "gone", "checkpoint_ns": ""}},
        checkpoint,
        {},
        {"messages": "9" * 32 + ".0"},
    )
    with store._connection() as conn:
        rows = conn.execute(
            "SELECT b.base_version FROM langgraph_blobs AS b JOIN langgraph_threads AS t "
            "USING (session_id) WHERE t.thread_id = 'gone'"
        ).fetchall()
    assert [r["base_version"] for r in rows] == [None]
    fresh = IkigaiSaver(store).get_tuple({"configurable": {"thread_id": "gone"}})
    assert fresh is not None
    assert fresh.checkpoint["channel_values"]["messages"] == messages


def test_copies_racing_puts_hold_a_prefix(ikigai_db_url: str) -> None:
    """copy_thread while another connection keeps putting steps: every copy holds exactly the
    source's first k checkpoints, each readable whole by a fresh saver (the copy's bound never
    splits a put; committed writes, two stores)."""
    import threading

    thread = f"race-{uuid.uuid4()}"
    with ik.Store(ikigai_db_url, pool_size=2) as writer, ik.Store(ikigai_db_url) as copier:
        saver = IkigaiSaver(writer)
        _steps(saver, thread, 1)
        done = threading.Event()
        copies: list[str] = []

        def copy_while_writing() -> None:
            other = IkigaiSaver(copier)
            while not done.is_set():
                target = f"{thread}-copy-{len(copies)}"
                other.copy_thread(thread, target)
                copies.append(target)

        worker = threading.Thread(target=copy_while_writing)
        worker.start()
        try:
            _steps(saver, thread, 40)
        finally:
            done.set()
            worker.join()
        fresh = IkigaiSaver(writer)
        source = [
            t.config["configurable"]["checkpoint_id"]
            for t in fresh.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        ][::-1]
        assert copies
        for target in copies:
            config: Any = {"configurable": {"thread_id": target, "checkpoint_ns": ""}}
            ids = [t.config["configurable"]["checkpoint_id"] for t in fresh.list(config)][::-1]
            assert ids == source[: len(ids)]
            newest = fresh.get_tuple(config)
            assert newest is not None
            assert len(newest.checkpoint["channel_values"]["messages"]) == len(ids)


def test_list_without_a_config_spans_threads(store: ik.Store) -> None:
    """list(None, filter=...) lists every thread's checkpoints whose metadata matches, newest
    first, a copy's inherited ones under the copy's name too."""
    saver = IkigaiSaver(store)
    p = f"spans-{uuid.uuid4().hex[:8]}-"  # other tests of this file leave committed threads
    _steps(saver, p + "x", 2)
    _steps(saver, p + "y", 1)
    saver.copy_thread(p + "x", p + "x2")
    listed = [
        t
        for t in saver.list(None, filter={"source": "loop", "step": 0})
        if t.config["configurable"]["thread_id"].startswith(p)
    ]
    assert sorted(t.config["configurable"]["thread_id"] for t in listed) == [
        p + "x",
        p + "x2",
        p + "y",
    ]
    ids = [t.config["configurable"]["checkpoint_id"] for t in listed]
    assert ids == sorted(ids, reverse=True)
    assert len(list(saver.list(None, limit=2))) == 2


@pytest.fixture
def own_store(request: pytest.FixtureRequest, ikigai_server_url: str) -> Iterator[ik.Store]:
    """A store on a migrated database of its own (every thread in it is the test's)."""
    name = test_database_name(request.path, "_own")
    url = fresh_database(ikigai_server_url, name)
    migrate.apply(url)
    with ik.Store(url, pool_size=2) as store:
        yield store
    drop_test_database(ikigai_server_url, name)


def test_every_threads_list_is_the_threads_lists_merged(own_store: ik.Store) -> None:
    """list(None) is every thread's own list merged newest first (ties by thread name), copies
    and copies of copies included, and list(None, limit=k) is its first k (migration 0037
    reads the threads' own rows in one statement and walks only copies)."""
    saver = IkigaiSaver(own_store)
    p = "merged-"
    _steps(saver, p + "a", 3)
    _steps(saver, p + "b", 2)
    saver.copy_thread(p + "a", p + "a2")  # the copy shares a's checkpoint ids: ties
    _steps(saver, p + "a2", 1)
    saver.copy_thread(p + "a2", p + "a3")
    _steps(saver, p + "b", 1)

    def key(t: Any) -> tuple[str, str]:
        c = t.config["configurable"]
        return c["thread_id"], c["checkpoint_id"]

    every = [key(t) for t in saver.list(None)]
    threads = {thread for thread, _ in every}
    merged = [
        key(t)
        for thread in threads
        for t in saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    ]
    merged.sort(key=lambda k: k[0])
    merged.sort(key=lambda k: k[1], reverse=True)  # stable: newest first, then by thread
    assert every == merged
    for k in range(1, len(every) + 1):
        assert [key(t) for t in saver.list(None, limit=k)] == every[:k]
    older = every[len(every) // 2][1]
    assert [
        key(t) for t in saver.list(None, before={"configurable": {"checkpoint_id": older}})
    ] == [x for x in every if x[1] < older]


def _thread_rows(store: ik.Store, session_id: int) -> int:
    """How many checkpoint, blob and write rows the session holds (one table at a time: on
    Citus a distributed table is not joined with a coordinator one)."""
    with store._connection() as conn:
        return sum(
            conn.execute(
                f"SELECT count(*) AS n FROM {t} WHERE session_id = %s", (session_id,)
            ).fetchone()["n"]
            for t in ("langgraph_checkpoints", "langgraph_blobs", "langgraph_writes")
        )


def test_pruning_an_ended_threads_session_deletes_its_rows(store: ik.Store) -> None:
    """Retention deleting a thread's ended session deletes its checkpoints, blobs and writes
    too (on Citus, where they have no foreign key to cascade on, as on plain PostgreSQL), and
    leaves other threads' rows alone."""
    saver = IkigaiSaver(store)
    p = f"pruned-{uuid.uuid4().hex[:8]}-"
    config, _ = _steps(saver, p + "gone", 2)
    saver.put_writes(config, [("messages", "pending")], "task-1")
    _steps(saver, p + "kept", 1)
    with store._connection() as conn:
        sessions = {
            r["thread_id"]: r["session_id"]
            for r in conn.execute(
                "SELECT thread_id, session_id FROM langgraph_threads WHERE thread_id LIKE %s",
                (p + "%",),
            )
        }
    gone, kept = sessions[p + "gone"], sessions[p + "kept"]
    before = _thread_rows(store, kept)
    assert _thread_rows(store, gone) >= 5 and before >= 2
    store.end_session(gone)
    store.prune_sessions(ended_before=datetime.now(UTC) + timedelta(days=1))
    assert _thread_rows(store, gone) == 0
    assert _thread_rows(store, kept) == before
    assert saver.get_tuple({"configurable": {"thread_id": p + "gone"}}) is None


def test_from_conn_string_takes_the_stores_and_the_savers_options(ikigai_db_url: str) -> None:
    """``migrate=False`` and ``pool_size`` reach the store, the saver's options the saver; an
    unknown keyword is a TypeError at the call (typed, so mypy sees it too)."""
    with IkigaiSaver.from_conn_string(
        ikigai_db_url, migrate=False, pool_size=2, max_appends=3
    ) as saver:
        assert saver.max_appends == 3 and saver.store._pool._max_size == 2
    with pytest.raises(TypeError), IkigaiSaver.from_conn_string(ikigai_db_url, migrat=False):  # type: ignore[call-arg]
        pass


@pytest.mark.asyncio
async def test_async_from_conn_string_takes_the_same_options(ikigai_db_url: str) -> None:
    async with AsyncIkigaiSaver.from_conn_string(
        ikigai_db_url, migrate=False, pool_size=2, cache_size=7
    ) as saver:
        assert saver.cache_size == 7 and saver.store._pool._max_size == 2
