"""Agents: registry operations, validation, constant-work fork, one-statement replay."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

import ikigai_store as ik

pytestmark = pytest.mark.db


@pytest.fixture
def sid(ikigai_store: ik.Store) -> int:
    return ikigai_store.create_session()


@contextmanager
def count_statements() -> Iterator[list[str]]:
    """Record every statement psycopg sends from this process inside the block (both faces)."""
    sent: list[str] = []
    original = psycopg.Cursor.execute
    original_async = psycopg.AsyncCursor.execute

    def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(str(query))
        return original(self, query, params, **kwargs)

    async def execute_async(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(str(query))
        return await original_async(self, query, params, **kwargs)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    psycopg.AsyncCursor.execute = execute_async  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        psycopg.Cursor.execute = original  # type: ignore[method-assign]
        psycopg.AsyncCursor.execute = original_async  # type: ignore[method-assign]


def test_agent_uuid_format(ikigai_store: ik.Store, sid: int) -> None:
    """Agent uuids are 22-char base64url strings (16 random bytes), distinct, never "-"-led."""
    uuids = {ikigai_store.create_agent(sid).uuid for _ in range(200)}
    assert len(uuids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", u) for u in uuids)


def test_create_and_get(ikigai_store: ik.Store, sid: int) -> None:
    """A root agent has no parent, fork point 0, status running, and the given fields."""
    a = ikigai_store.create_agent(
        sid, name="main", provider="anthropic", model="m", thinking_level="high"
    )
    assert ikigai_store.get_agent(a.uuid) == a
    assert (a.parent_uuid, a.fork_message_id, a.status, a.idle) == (None, 0, "running", False)
    assert (a.provider, a.model, a.thinking_level, a.name) == ("anthropic", "m", "high", "main")


def test_fork_inherits_settings_and_points_at_own_events(ikigai_store: ik.Store, sid: int) -> None:
    """fork_message_id is the parent's newest own event; unset model fields are inherited."""
    root = ikigai_store.create_agent(sid, provider="p", model="m")
    other = ikigai_store.create_agent(sid)
    own = ikigai_store.append(sid, "user", "mine", agent_uuid=root.uuid)
    ikigai_store.append(sid, "user", "someone else's", agent_uuid=other.uuid)
    ikigai_store.append(sid, "user", "no agent")
    child = ikigai_store.fork_agent(root.uuid, model="m2")
    assert child.fork_message_id == own.id
    assert (child.parent_uuid, child.session_id) == (root.uuid, sid)
    assert (child.provider, child.model) == ("p", "m2")


def test_fork_of_agent_without_events_points_at_zero(ikigai_store: ik.Store, sid: int) -> None:
    """A parent with no own events gives fork point 0."""
    root = ikigai_store.create_agent(sid)
    assert ikigai_store.fork_agent(root.uuid).fork_message_id == 0


def test_fork_writes_one_row_in_one_statement(ikigai_store: ik.Store, sid: int) -> None:
    """fork_agent adds exactly one agents row, copies no message, and sends one statement."""
    root = ikigai_store.create_agent(sid)
    for i in range(50):
        ikigai_store.append(sid, "user", str(i), agent_uuid=root.uuid)
    before = ikigai_store.count_messages(sid)
    agents_before = len(ikigai_store.running_agents(sid))
    with count_statements() as sent:
        ikigai_store.fork_agent(root.uuid)
    assert len([s for s in sent if not s.startswith(("SAVEPOINT", "RELEASE"))]) == 1
    assert ikigai_store.count_messages(sid) == before
    assert len(ikigai_store.running_agents(sid)) == agents_before + 1


@pytest.mark.parametrize("depth", [1, 10, 100])
def test_replay_agent_is_one_statement_at_any_depth(
    ikigai_store: ik.Store, sid: int, depth: int
) -> None:
    """replay_agent sends a single statement whatever the ancestry depth."""
    agent = ikigai_store.create_agent(sid)
    for _ in range(depth - 1):
        ikigai_store.append(sid, "user", "x", agent_uuid=agent.uuid)
        agent = ikigai_store.fork_agent(agent.uuid)
    with count_statements() as sent:
        ctx = ikigai_store.replay_agent(agent.uuid)
    assert len(ctx.messages) == depth - 1
    assert len([s for s in sent if not s.startswith(("SAVEPOINT", "RELEASE"))]) == 1


def test_append_agent_must_belong_to_session(ikigai_store: ik.Store, sid: int) -> None:
    """Appending with an agent of another session (InvalidArgument) or an unknown one
    (NotFound) writes nothing."""
    other = ikigai_store.create_session()
    foreign = ikigai_store.create_agent(other)
    with pytest.raises(ik.InvalidArgument, match="not an agent of session"):
        ikigai_store.append(sid, "user", "x", agent_uuid=foreign.uuid)
    with pytest.raises(ik.NotFound, match="agent no-such-agent does not exist"):
        ikigai_store.append(sid, "user", "x", agent_uuid="no-such-agent")
    for bad_type in (1, "", "x" * 65, "a\x00b"):
        with pytest.raises(ik.InvalidArgument):
            ikigai_store.append(sid, "user", "x", agent_uuid=bad_type)  # type: ignore[arg-type]
    assert ikigai_store.messages(sid) == []


def test_missing_agents_are_not_found(ikigai_store: ik.Store) -> None:
    """Every lookup of an unknown agent raises NotFound."""
    for call in (
        ikigai_store.get_agent,
        ikigai_store.fork_agent,
        ikigai_store.kill_agent,
        ikigai_store.reap_agent,
        ikigai_store.children,
        ikigai_store._replay_ranges,
        ikigai_store.replay_agent,
        ikigai_store.mark,
        ikigai_store.clear,
    ):
        with pytest.raises(ik.NotFound):
            call("nope")
    with pytest.raises(ik.NotFound):
        ikigai_store.set_agent_idle("nope", True)
    with pytest.raises(ik.NotFound):
        ikigai_store.update_agent_model("nope", model="m")
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.create_agent(10**12)


def test_kill_reap_lifecycle(ikigai_store: ik.Store, sid: int) -> None:
    """kill marks the subtree dead with ended_at; reap needs dead; killed agents stay readable."""
    root = ikigai_store.create_agent(sid)
    child = ikigai_store.fork_agent(root.uuid)
    grandchild = ikigai_store.fork_agent(child.uuid)
    sibling = ikigai_store.fork_agent(root.uuid)
    with pytest.raises(ik.InvalidArgument, match="running"):
        ikigai_store.reap_agent(child.uuid)
    assert ikigai_store.kill_agent(child.uuid) == [child.uuid, grandchild.uuid]
    assert ikigai_store.kill_agent(child.uuid) == []
    dead = ikigai_store.get_agent(grandchild.uuid)
    assert dead.status == "dead" and dead.ended_at is not None
    assert [a.uuid for a in ikigai_store.running_agents(sid)] == [root.uuid, sibling.uuid]
    ikigai_store.reap_agent(child.uuid)
    ikigai_store.reap_agent(child.uuid)  # idempotent
    assert ikigai_store.get_agent(child.uuid).status == "reaped"
    assert [a.uuid for a in ikigai_store.children(root.uuid)] == [child.uuid, sibling.uuid]
    # a runtime may still record the kill in the stream
    ikigai_store.append(sid, "agent_killed", None, {"uuid": child.uuid}, agent_uuid=root.uuid)


def test_idle_and_model_updates(ikigai_store: ik.Store, sid: int) -> None:
    """set_agent_idle toggles idle; update_agent_model changes only the fields given."""
    a = ikigai_store.create_agent(sid, provider="p", model="m", thinking_level="low")
    ikigai_store.set_agent_idle(a.uuid, True)
    assert ikigai_store.get_agent(a.uuid).idle is True
    b = ikigai_store.update_agent_model(a.uuid, model="m2")
    assert (b.provider, b.model, b.thinking_level) == ("p", "m2", "low")
    c = ikigai_store.update_agent_model(a.uuid, provider=None, thinking_level="high")
    assert (c.provider, c.model, c.thinking_level) == (None, "m2", "high")
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.set_agent_idle(a.uuid, 1)  # type: ignore[arg-type]


def test_running_agents_across_sessions(ikigai_store: ik.Store, sid: int) -> None:
    """running_agents() without a session lists every session's, parents first."""
    other = ikigai_store.create_session()
    a = ikigai_store.create_agent(sid)
    b = ikigai_store.create_agent(other)
    c = ikigai_store.fork_agent(a.uuid)
    assert [x.uuid for x in ikigai_store.running_agents()] == [a.uuid, b.uuid, c.uuid]
    assert [x.uuid for x in ikigai_store.running_agents(other)] == [b.uuid]


def test_ensure_root_agent_adopts_orphans(ikigai_store: ik.Store, sid: int) -> None:
    """ensure_root_agent creates agent zero once and gives it the session's agentless events."""
    m = ikigai_store.append(sid, "user", "before agents")
    zero = ikigai_store.ensure_root_agent(sid, name="zero", model="m")
    assert zero.name == "zero" and zero.parent_uuid is None
    assert ikigai_store.ensure_root_agent(sid, name="ignored") == ikigai_store.get_agent(zero.uuid)
    assert [x.agent_uuid for x in ikigai_store.messages(sid)] == [zero.uuid]
    assert ikigai_store.replay_agent(zero.uuid).message_ids == [m.id]
    with pytest.raises(ik.NotFound):
        ikigai_store.ensure_root_agent(10**12)
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.ensure_root_agent(sid, colour="red")


def test_rewind_convenience_stays_on_own_stack(ikigai_store: ik.Store, sid: int) -> None:
    """rewind() targets a mark on the agent's own replayed stack, never another agent's."""
    a = ikigai_store.create_agent(sid)
    b = ikigai_store.create_agent(sid)
    ikigai_store.mark(b.uuid, "cp")  # same label, other agent
    with pytest.raises(ik.InvalidArgument, match="has no mark labelled 'cp' on its stack"):
        ikigai_store.rewind(a.uuid, "cp")
    mine = ikigai_store.mark(a.uuid, "cp")
    ikigai_store.append(sid, "user", "detour", agent_uuid=a.uuid)
    rw = ikigai_store.rewind(a.uuid, "cp")
    assert rw.data == {"target_message_id": mine.id, "target_label": "cp"}
    assert ikigai_store.replay_agent(a.uuid).message_ids == [mine.id, rw.id]
    unlabelled = ikigai_store.mark(a.uuid)
    assert ikigai_store.rewind(a.uuid).data["target_message_id"] == unlabelled.id
    ikigai_store.clear(a.uuid)
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.rewind(a.uuid)


def test_schema_enforces_agent_session(ikigai_store: ik.Store, sid: int) -> None:
    """Even raw SQL cannot file an event under an agent of another session (composite FK)."""
    other = ikigai_store.create_session()
    foreign = ikigai_store.create_agent(other)
    with pytest.raises(ik.DatabaseError) as info, ikigai_store._connection() as conn:
        conn.execute(
            "INSERT INTO messages (session_id, agent_uuid, kind) VALUES (%s, %s, 'user')",
            (sid, foreign.uuid),
        )
    assert isinstance(info.value.__cause__, psycopg.errors.ForeignKeyViolation)
