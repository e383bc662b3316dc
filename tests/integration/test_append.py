"""Appending events: validation rejects bad input and writes nothing; good input round-trips."""

from __future__ import annotations

import math
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import ikigai_store as ik

pytestmark = pytest.mark.db


@pytest.fixture
def sid(ikigai_store: ik.Store) -> int:
    return ikigai_store.create_session()


def test_append_round_trip(ikigai_store: ik.Store, sid: int) -> None:
    """An appended event comes back with its fields, parsed data and increasing ids."""
    a = ikigai_store.append(sid, "user", "hello", {"model": "gpt-4", "temperature": 1.0})
    b = ikigai_store.append(sid, "clear")
    c = ikigai_store.append(sid, "assistant", "")
    assert a.session_id == sid and a.kind == "user" and a.content == "hello"
    assert a.data == {"model": "gpt-4", "temperature": 1.0}
    assert a.agent_uuid is None
    assert b.content is None and b.data is None
    assert c.content == ""
    assert a.id < b.id < c.id
    assert ikigai_store.messages(sid) == [a, b, c]


def test_every_valid_kind_is_accepted(ikigai_store: ik.Store, sid: int) -> None:
    """All valid kinds except rewind and pop (which need a target) append without data."""
    for kind in sorted(ik.VALID_KINDS - {"rewind", "pop"}):
        assert ikigai_store.append(sid, kind, kind).kind == kind


def test_tool_result_helper(ikigai_store: ik.Store, sid: int) -> None:
    """ik.tool_result builds the canonical tool_result event, which appends as is."""
    m = ik.tool_result("call_abc123", "glob", "a.c\nb.c", True, "2 files found")
    assert m.kind == "tool_result" and m.content == "2 files found"
    assert m.data == {
        "tool_call_id": "call_abc123",
        "name": "glob",
        "output": "a.c\nb.c",
        "success": True,
    }
    stored = ikigai_store.append(sid, m.kind, m.content, m.data)
    assert stored.data == m.data


def test_is_valid_kind() -> None:
    """is_valid_kind accepts exactly the listed kinds."""
    assert ik.is_valid_kind("user")
    assert ik.is_valid_kind("agent_killed")
    for bad in (None, "", "User", "user ", " user", "rewind\n", 1, "unknown"):
        assert not ik.is_valid_kind(bad)


BAD_APPENDS: list[tuple[str, tuple[Any, ...]]] = [
    ("kind None", (None,)),
    ("kind empty", ("",)),
    ("kind case", ("User",)),
    ("kind trailing space", ("user ",)),
    ("kind unknown", ("banana",)),
    ("content NUL", ("user", "a\x00b")),
    ("content not str", ("user", 42)),
    ("content lone surrogate", ("user", "\ud800")),
    ("data NUL value", ("user", "x", {"k": "a\x00"})),
    ("data NUL key", ("user", "x", {"a\x00": 1})),
    ("data nested NUL", ("user", "x", {"k": ["ok", {"deep": "\x00"}]})),
    ("data not JSON", ("user", "x", {"k": object()})),
    ("data set", ("user", "x", {1, 2})),
    ("data NaN", ("user", "x", {"k": math.nan})),
    ("data inf", ("user", "x", [math.inf])),
    ("mark label int", ("mark", "m", {"label": 3})),
    ("mark label list", ("mark", "m", {"label": ["a"]})),
    ("rewind no data", ("rewind",)),
    ("rewind no target", ("rewind", None, {"target_label": "x"})),
    ("rewind target str", ("rewind", None, {"target_message_id": "1"})),
    ("rewind target bool", ("rewind", None, {"target_message_id": True})),
    ("rewind target float", ("rewind", None, {"target_message_id": 1.0})),
    ("rewind target missing", ("rewind", None, {"target_message_id": 10**12})),
    ("pop no data", ("pop",)),
    ("pop target str", ("pop", None, {"target_message_id": "1"})),
    ("pop target bool", ("pop", None, {"target_message_id": True})),
    ("pop target missing", ("pop", None, {"target_message_id": 10**12})),
]


@pytest.mark.parametrize("args", [a for _, a in BAD_APPENDS], ids=[n for n, _ in BAD_APPENDS])
def test_bad_append_raises_and_writes_nothing(
    ikigai_store: ik.Store, sid: int, args: tuple[Any, ...]
) -> None:
    """Each kind of bad input raises InvalidArgument (a ValueError) and stores nothing."""
    ikigai_store.append(sid, "user", "before")
    before = ikigai_store.messages(sid)
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.append(sid, *args)
    with pytest.raises(ValueError):
        ikigai_store.append(sid, *args)
    assert ikigai_store.messages(sid) == before


def test_append_to_missing_session(ikigai_store: ik.Store) -> None:
    """Appending to a session that does not exist raises NotFound (as reading it does)."""
    with pytest.raises(ik.NotFound, match="does not exist"):
        ikigai_store.append(123_456, "user", "x")
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.append(0, "user", "x")


def test_rewind_target_must_be_mark_of_same_session(ikigai_store: ik.Store, sid: int) -> None:
    """A rewind may only name a mark event of its own session."""
    user = ikigai_store.append(sid, "user", "not a mark")
    other = ikigai_store.create_session()
    foreign_mark = ikigai_store.append(other, "mark", "m", {"label": "m"})
    for target in (user.id, foreign_mark.id):
        with pytest.raises(ik.InvalidArgument, match="not a mark"):
            ikigai_store.append(sid, "rewind", None, {"target_message_id": target})
    own_mark = ikigai_store.append(sid, "mark", None, {"label": None})
    rw = ikigai_store.append(sid, "rewind", None, {"target_message_id": own_mark.id})
    assert rw.kind == "rewind"


def test_pop_target_must_be_an_event_of_the_same_session(ikigai_store: ik.Store, sid: int) -> None:
    """A pop may name any event of its own session but a clear or a pop; replay drops it."""
    user = ikigai_store.append(sid, "user", "popped")
    clear = ikigai_store.append(sid, "clear")
    kept = ikigai_store.append(sid, "user", "kept")
    other = ikigai_store.create_session()
    foreign = ikigai_store.append(other, "user", "elsewhere")
    for target in (clear.id, foreign.id):
        with pytest.raises(ik.InvalidArgument, match="pop target"):
            ikigai_store.append(sid, "pop", None, {"target_message_id": target})
    stale = ikigai_store.append(sid, "pop", None, {"target_message_id": user.id})
    with pytest.raises(ik.InvalidArgument, match="pop target"):
        ikigai_store.append(sid, "pop", None, {"target_message_id": stale.id})
    assert ikigai_store.replay_session(sid).skipped == [stale.id]
    pop = ikigai_store.append(sid, "pop", None, {"target_message_id": kept.id})
    ctx = ikigai_store.replay_session(sid)
    assert ctx.messages == [] and ctx.skipped == [stale.id]
    assert [m.id for m in ikigai_store.messages(sid)][-1] == pop.id


def test_append_many_one_statement_all_or_nothing(ikigai_store: ik.Store, sid: int) -> None:
    """append_many stores events in order with consecutive ids, each checked like append's;
    one bad event stores none; rewinds and pops are refused; [] is a no-op."""
    stored = ikigai_store.append_many(
        sid, [("user", "a", None), ("mark", "m", {"label": "m"}), ("assistant", "b", [1])]
    )
    assert [(m.kind, m.content, m.data) for m in stored] == [
        ("user", "a", None),
        ("mark", "m", {"label": "m"}),
        ("assistant", "b", [1]),
    ]
    assert [m.id for m in stored] == list(range(stored[0].id, stored[0].id + 3))
    assert ikigai_store.messages(sid) == stored
    for bad in (
        [("user", "ok", None), ("nope", None, None)],
        [("user", "ok", None), ("user", "nul\x00", None)],
        [("mark", None, {"label": 3})],
        [("rewind", None, {"target_message_id": stored[1].id})],
        [("pop", None, {"target_message_id": stored[0].id})],
        [("user", "x")],
        "user",
    ):
        with pytest.raises(ik.InvalidArgument):
            ikigai_store.append_many(sid, bad)  # type: ignore[arg-type]
    assert ikigai_store.messages(sid) == stored
    assert ikigai_store.append_many(sid, []) == []
    with pytest.raises(ik.NotFound):
        ikigai_store.append_many(123_456, [("user", "x", None)])
    ikigai_store.end_session(sid)
    with pytest.raises(ik.InvalidArgument, match="ended"):
        ikigai_store.append_many(sid, [("user", "x", None)])


def test_replay_tail_and_pop_session(ikigai_store: ik.Store, sid: int) -> None:
    """replay_tail is the newest part of replay_session's context; pop_session removes the
    newest event (a mark leaves the stack too), returns it, and writes nothing when empty."""
    assert ikigai_store.pop_session(sid) is None
    assert ikigai_store.count_messages(sid) == 0
    a = ikigai_store.append(sid, "user", "a")
    mark = ikigai_store.append(sid, "mark", "m", {"label": "m"})
    ikigai_store.append(sid, "user", "cut")
    rewind = ikigai_store.append(sid, "rewind", None, {"target_message_id": mark.id})
    b = ikigai_store.append(sid, "assistant", "b")
    assert [m.id for m in ikigai_store.replay_tail(sid)] == [a.id, mark.id, rewind.id, b.id]
    assert [m.id for m in ikigai_store.replay_tail(sid, limit=3)] == [mark.id, rewind.id, b.id]
    assert ikigai_store.pop_session(sid) == b
    assert ikigai_store.pop_session(sid) == rewind
    assert ikigai_store.pop_session(sid) == mark
    assert ikigai_store.replay_session(sid).marks == []
    assert ikigai_store.replay_tail(sid) == [a]
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.replay_tail(sid, limit=0)
    with pytest.raises(ik.NotFound):
        ikigai_store.replay_tail(123_456)
    with pytest.raises(ik.NotFound):
        ikigai_store.pop_session(123_456)


def test_mark_labels_accepted(ikigai_store: ik.Store, sid: int) -> None:
    """Marks accept a string label, a null label, no label and no data."""
    for data in ({"label": "a"}, {"label": None}, {"number": 1}, None):
        assert ikigai_store.append(sid, "mark", None, data).kind == "mark"


def test_unicode_and_json_values_round_trip(ikigai_store: ik.Store, sid: int) -> None:
    """Non-ASCII text, quotes and every JSON value type survive storage unchanged."""
    content = "héllo 'quoted' \"double\" \\ 🚀 \t\n"
    data = {"s": "ü", "n": 1, "f": 1.5, "b": False, "z": None, "l": [1, "2"], "o": {"k": []}}
    m = ikigai_store.append(sid, "assistant", content, data)
    assert ikigai_store.messages(sid)[-1].content == content
    assert m.data == data
    for value in ([1, 2], "text", 7, True):
        assert ikigai_store.append(sid, "usage", None, value).data == value


def test_failed_append_inside_transaction_keeps_transaction_usable(ikigai_store: ik.Store) -> None:
    """A rejected write inside store.transaction() does not poison the transaction."""
    with ikigai_store.transaction():
        sid = ikigai_store.create_session()
        with pytest.raises(ik.InvalidArgument):
            ikigai_store.append(sid, "rewind", None, {"target_message_id": 10**12})
        with pytest.raises(ik.NotFound):
            ikigai_store.append(10**12, "user", "x")  # foreign-key violation path
        ikigai_store.append(sid, "user", "still fine")
    assert [m.content for m in ikigai_store.messages(sid)] == ["still fine"]


def test_transaction_rolls_back_on_exception(ikigai_store: ik.Store) -> None:
    """An exception inside store.transaction() rolls back every write of the block."""
    sid = ikigai_store.create_session()
    with pytest.raises(RuntimeError), ikigai_store.transaction():
        ikigai_store.append(sid, "user", "one")
        ikigai_store.append(sid, "assistant", "two")
        raise RuntimeError("boom")
    assert ikigai_store.messages(sid) == []


def test_appends_notify_only_listened_sessions(ikigai_db_url: str) -> None:
    """Every kind of append to a session whose listened_until (migration 0024) is in the
    future notifies ikigai_session with its id on commit; appends to a session never listened
    to, or whose registration has lapsed, notify nothing."""
    q = ik.queries
    with (
        ik.Store(ikigai_db_url, pool_size=1) as store,
        psycopg.connect(ikigai_db_url, autocommit=True) as conn,
    ):
        listened, quiet, lapsed = (store.create_session(t) for t in ("on", "off", "lapsed"))
        agent = store.create_agent(listened)
        for sid, ttl in ((listened, timedelta(minutes=5)), (lapsed, timedelta(0))):
            params = {"session_ids": [sid], "listener": uuid.uuid4(), "ttl": ttl}
            conn.execute(q.session_listeners_register.sql, params)
        conn.execute("LISTEN ikigai_session")

        def heard() -> list[str]:
            """Payloads heard before a sentinel sent now from another connection."""
            with psycopg.connect(ikigai_db_url, autocommit=True) as other:
                other.execute("SELECT pg_notify('ikigai_session', 'sentinel')")
            got = []
            for n in conn.notifies(timeout=10):
                if n.payload == "sentinel":
                    return got
                got.append(n.payload)
            raise AssertionError("the sentinel never came")

        store.append(quiet, "user", "nobody listens")
        store.append(lapsed, "user", "nobody listens any more")
        store.append_many(quiet, [("user", "a", None), ("user", "b", None)])
        assert heard() == []
        store.append(listened, "user", "heard")
        assert heard() == [str(listened)]
        store.append(listened, "user", "from the agent", agent_uuid=agent.uuid)
        assert heard() == [str(listened)]
        store.append_many(listened, [("user", "a", None), ("user", "b", None)])
        assert heard() == [str(listened)]
        store.mark(agent.uuid, "m")
        assert heard() == [str(listened)]


def test_the_append_statements_raise_their_refusals(ikigai_db_url: str) -> None:
    """Raw SQL running the named append statements (migration 0040) gets each refusal as an
    error, IK404 (missing) or IK400 (refused), with the library's message; nothing is stored,
    and the store raises the same message as NotFound or InvalidArgument."""
    q = ik.queries
    with ik.Store(ikigai_db_url, pool_size=1) as store:  # committed: raw SQL sees it
        sid = store.create_session("refusals")
        other = store.create_session("other")
        user = store.append(sid, "user", "u")
        stranger = store.create_agent(other).uuid
        dead = store.create_agent(sid).uuid
        store.kill_agent(dead)
        ended = store.create_session("ended")
        store.end_session(ended)
        missing_agent = str(uuid.uuid4())
        event = {"kind": "user", "content": "x", "data": None}
        cases: list[tuple[str, dict[str, Any], str, str]] = [
            (
                "append_event",
                {"session_id": 10**12, **event},
                "IK404",
                f"session {10**12} does not exist",
            ),
            (
                "append_event",
                {"session_id": ended, **event},
                "IK400",
                f"session {ended} has ended: it accepts no more events",
            ),
            (
                "append_agent_event",
                {"session_id": sid, "agent_uuid": missing_agent, **event},
                "IK404",
                f"agent {missing_agent} does not exist",
            ),
            (
                "append_agent_event",
                {"session_id": sid, "agent_uuid": stranger, **event},
                "IK400",
                f"agent {stranger} is not an agent of session {sid}",
            ),
            (
                "append_agent_event",
                {"session_id": sid, "agent_uuid": dead, **event},
                "IK400",
                f"agent {dead} is dead: it accepts no more events (append agent_killed before "
                "kill_agent)",
            ),
            (
                "append_message",
                {
                    "session_id": sid,
                    "agent_uuid": None,
                    "kind": "rewind",
                    "content": None,
                    "data": None,
                    "target_message_id": user.id,
                },
                "IK400",
                f"rewind target {user.id} is not a mark event of session {sid}",
            ),
            (
                "append_message",
                {
                    "session_id": sid,
                    "agent_uuid": None,
                    "kind": "pop",
                    "content": None,
                    "data": None,
                    "target_message_id": 10**12,
                },
                "IK400",
                f"pop target {10**12} is not an event of session {sid} that a pop can remove "
                "(any but a clear or a pop)",
            ),
        ]
        # The batches (ikigai_append_batch): the same texts; run raw only, append_many below.
        batch = {"kinds": ["user", "user"], "contents": ["a", "b"], "datas": [None, None]}
        batches: list[tuple[str, dict[str, Any], str, str]] = [
            ("append_events", {"session_id": 10**12, **batch}, *cases[0][2:]),
            ("append_events", {"session_id": ended, **batch}, *cases[1][2:]),
            (
                "append_agent_events",
                {"session_id": sid, "agent_uuid": missing_agent, **batch},
                *cases[2][2:],
            ),
            (
                "append_agent_events",
                {"session_id": sid, "agent_uuid": stranger, **batch},
                *cases[3][2:],
            ),
            (
                "append_agent_events",
                {"session_id": sid, "agent_uuid": dead, **batch},
                *cases[4][2:],
            ),
        ]
        before = store.count_messages(sid)
        with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
            for name, params, state, message in cases + batches:
                with pytest.raises(psycopg.Error) as raised:
                    conn.execute(getattr(q, name).sql, params)
                assert (raised.value.sqlstate, raised.value.diag.message_primary) == (
                    state,
                    message,
                )
        assert store.count_messages(sid) == before
        assert store.count_messages(ended) == 0
        expected = {"IK404": ik.NotFound, "IK400": ik.InvalidArgument}
        for name, params, state, message in cases:
            data = (
                {"target_message_id": params["target_message_id"]}
                if name == "append_message"
                else None
            )
            with pytest.raises(expected[state]) as refused:
                store.append(
                    params["session_id"],
                    params["kind"],
                    params["content"],
                    data,
                    agent_uuid=params.get("agent_uuid"),
                )
            assert str(refused.value) == message
        for _, params, state, message in batches:
            with pytest.raises(expected[state]) as refused:
                store.append_many(
                    params["session_id"],
                    [("user", "a", None), ("user", "b", None)],
                    agent_uuid=params.get("agent_uuid"),
                )
            assert str(refused.value) == message


def test_an_empty_batch_statement_stores_nothing(ikigai_db_url: str) -> None:
    """append_events with empty arrays (raw SQL; append_many([]) never sends it) returns no
    row, on Citus too, where the rows are a multi-row VALUES built from the arrays."""
    with ik.Store(ikigai_db_url, pool_size=1) as store:
        sid = store.create_session("empty batch")
    params = {"session_id": sid, "kinds": [], "contents": [], "datas": []}
    with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
        assert conn.execute(ik.queries.append_events.sql, params).fetchall() == []
    with ik.Store(ikigai_db_url, pool_size=1) as store:
        assert store.count_messages(sid) == 0


# ---------------------------------------------------------------- idempotency keys


def test_a_keyed_append_is_stored_once(ikigai_store: ik.Store, sid: int) -> None:
    """A retried keyed append returns the event stored first and stores nothing; a key is
    the session's (another session, another key: another event); the key with another event
    is a Conflict that stores nothing; an agent's event and a rewind take keys too."""
    first = ikigai_store.append(sid, "user", "hello", {"n": 1}, idempotency_key="turn-1")
    assert ikigai_store.append(sid, "user", "hello", {"n": 1}, idempotency_key="turn-1") == first
    other = ikigai_store.append(sid, "user", "hello", {"n": 1}, idempotency_key="turn-2")
    assert other.id > first.id
    elsewhere = ikigai_store.create_session()
    assert ikigai_store.append(elsewhere, "user", "hello", idempotency_key="turn-1").id > other.id
    before = ikigai_store.messages(sid)
    for kind, content, data in [
        ("user", "hello", {"n": 2}),
        ("user", "hi", {"n": 1}),
        ("assistant", "hello", {"n": 1}),
    ]:
        with pytest.raises(ik.Conflict, match=r"'turn-1' of session \d+ was used for a differ"):
            ikigai_store.append(sid, kind, content, data, idempotency_key="turn-1")
    assert ikigai_store.messages(sid) == before
    agent = ikigai_store.create_agent(sid)
    mine = ikigai_store.append(sid, "assistant", "a", agent_uuid=agent.uuid, idempotency_key="a")
    assert (
        ikigai_store.append(sid, "assistant", "a", agent_uuid=agent.uuid, idempotency_key="a")
        == mine
    )
    with pytest.raises(ik.Conflict):
        ikigai_store.append(sid, "assistant", "a", idempotency_key="a")  # not the agent's
    mark = ikigai_store.append(sid, "mark", "m", {"label": "m"})
    rewind = {"target_message_id": mark.id}
    back = ikigai_store.append(sid, "rewind", None, rewind, idempotency_key="back")
    assert ikigai_store.append(sid, "rewind", None, rewind, idempotency_key="back") == back
    assert ikigai_store.count_messages(sid) == len(before) + 3


def test_a_keyed_retry_after_the_session_ended_returns_the_event(
    ikigai_store: ik.Store, sid: int
) -> None:
    """The event stored under a key is returned even once the session has ended (a retry
    whose first try committed); a new key there is refused as any append is."""
    stored = ikigai_store.append(sid, "assistant", "done", idempotency_key="last")
    ikigai_store.end_session(sid)
    assert ikigai_store.append(sid, "assistant", "done", idempotency_key="last") == stored
    with pytest.raises(ik.InvalidArgument, match="ended"):
        ikigai_store.append(sid, "assistant", "done", idempotency_key="other")
    with pytest.raises(ik.NotFound):
        ikigai_store.append(123_456, "user", "x", idempotency_key="k")


@pytest.mark.parametrize("key", ["", "k" * 201, 7, "nul\x00"], ids=["empty", "long", "int", "nul"])
def test_a_bad_key_is_refused_and_writes_nothing(
    ikigai_store: ik.Store, sid: int, key: Any
) -> None:
    """An empty, too long (over 200 characters), non-string or NUL-holding key raises
    InvalidArgument and stores nothing; 200 characters are accepted."""
    with pytest.raises(ik.InvalidArgument, match="idempotency_key"):
        ikigai_store.append(sid, "user", "x", idempotency_key=key)
    assert ikigai_store.count_messages(sid) == 0
    assert ikigai_store.append(sid, "user", "x", idempotency_key="k" * 200).content == "x"


def test_racing_keyed_appends_store_one_event(ikigai_db_url: str) -> None:
    """Eight threads appending the same keyed event at once all get the one event stored."""
    with ik.Store(ikigai_db_url, pool_size=8) as store:
        sid = store.create_session()
        for round_ in range(5):

            def go(barrier: threading.Barrier, key: str) -> ik.Message:
                barrier.wait()
                return store.append(sid, "user", "once", idempotency_key=key)

            barrier = threading.Barrier(8)

            with ThreadPoolExecutor(8) as pool:
                futures = [pool.submit(go, barrier, f"race-{round_}") for _ in range(8)]
                got = [f.result() for f in futures]
            assert len({m.id for m in got}) == 1
        assert [m.content for m in store.messages(sid)] == ["once"] * 5


def test_a_keyed_batch_is_stored_once(ikigai_store: ik.Store, sid: int) -> None:
    """A retried keyed batch returns the events stored first and stores nothing, even once the
    session has ended; the key is on the batch's first event (one key space per session with
    single appends); another batch under the key is a Conflict that stores nothing; an agent's
    batch keeps its agent in the comparison."""
    events = [("user", "q", {"n": 1}), ("assistant", "a", None), ("tool_call", None, [1, 2])]
    first = ikigai_store.append_many(sid, events, idempotency_key="batch-1")
    assert [m.id for m in first] == list(range(first[0].id, first[0].id + 3))
    later = ikigai_store.append(sid, "user", "after")
    assert ikigai_store.append_many(sid, events, idempotency_key="batch-1") == first
    before = ikigai_store.messages(sid)
    for other in (
        [*events, ("user", "z", None)],  # longer: the 4th is 'after'
        [events[0], ("assistant", "b", None), events[2]],
        [("user", "q", {"n": 2}), *events[1:]],
    ):
        with pytest.raises(ik.Conflict, match=r"'batch-1' of session \d+ was used for differ"):
            ikigai_store.append_many(sid, other, idempotency_key="batch-1")
    # The session's events from the keyed one, as many as asked: a prefix of the batch, or
    # the batch and what followed it, are found, not stored again.
    assert ikigai_store.append_many(sid, events[:2], idempotency_key="batch-1") == first[:2]
    longer = [*events, ("user", "after", None)]
    assert ikigai_store.append_many(sid, longer, idempotency_key="batch-1") == [*first, later]
    # A single append under the batch's key finds the batch's first event.
    assert ikigai_store.append(sid, "user", "q", {"n": 1}, idempotency_key="batch-1") == first[0]
    with pytest.raises(ik.Conflict):
        ikigai_store.append(sid, "user", "other", idempotency_key="batch-1")
    assert ikigai_store.messages(sid) == before
    # A batch under a single append's key compares with the session's events from it.
    solo = ikigai_store.append(sid, "user", "solo", idempotency_key="solo")
    assert ikigai_store.append_many(sid, [("user", "solo", None)], idempotency_key="solo") == [solo]
    with pytest.raises(ik.Conflict):
        ikigai_store.append_many(
            sid, [("user", "solo", None), ("user", "more", None)], idempotency_key="solo"
        )
    assert ikigai_store.messages(sid) == [*before, solo]
    assert later.id == first[-1].id + 1
    agent = ikigai_store.create_agent(sid)
    mine = ikigai_store.append_many(
        sid, events[:1], agent_uuid=agent.uuid, idempotency_key="agent-batch"
    )
    assert (
        ikigai_store.append_many(
            sid, events[:1], agent_uuid=agent.uuid, idempotency_key="agent-batch"
        )
        == mine
    )
    with pytest.raises(ik.Conflict):
        ikigai_store.append_many(sid, events[:1], idempotency_key="agent-batch")
    ikigai_store.end_session(sid)
    assert ikigai_store.append_many(sid, events, idempotency_key="batch-1") == first
    with pytest.raises(ik.InvalidArgument, match="ended"):
        ikigai_store.append_many(sid, events, idempotency_key="batch-2")
    with pytest.raises(ik.NotFound):
        ikigai_store.append_many(123_456, events, idempotency_key="batch-1")


@pytest.mark.parametrize("key", ["", "k" * 201, 7, "nul\x00"], ids=["empty", "long", "int", "nul"])
def test_a_bad_batch_key_is_refused_and_writes_nothing(
    ikigai_store: ik.Store, sid: int, key: Any
) -> None:
    """A bad key raises InvalidArgument before anything is written, as append's."""
    with pytest.raises(ik.InvalidArgument, match="idempotency_key"):
        ikigai_store.append_many(sid, [("user", "x", None)], idempotency_key=key)
    assert ikigai_store.count_messages(sid) == 0


def test_racing_keyed_batches_store_one_batch(ikigai_db_url: str) -> None:
    """Eight threads appending the same keyed batch at once all get the one batch stored."""
    events = [("user", "once", None), ("assistant", "twice", None)]
    with ik.Store(ikigai_db_url, pool_size=8) as store:
        sid = store.create_session()
        for round_ in range(5):

            def go(barrier: threading.Barrier, key: str) -> list[ik.Message]:
                barrier.wait()
                return store.append_many(sid, events, idempotency_key=key)

            barrier = threading.Barrier(8)
            with ThreadPoolExecutor(8) as pool:
                futures = [pool.submit(go, barrier, f"race-{round_}") for _ in range(8)]
                got = [f.result() for f in futures]
            assert len({tuple(m.id for m in g) for g in got}) == 1
        assert [m.content for m in store.messages(sid)] == ["once", "twice"] * 5
