"""Agents through the store: the seed's range cases, forks, clears, rewinds and kills."""

from __future__ import annotations

import pytest

import ikigai_store as ik

pytestmark = pytest.mark.db


def ranges(store: ik.Store, uuid: str) -> list[tuple[str, int, int | None]]:
    return [(r.agent_uuid, r.start_id, r.end_id) for r in store._replay_ranges(uuid)]


def ids(store: ik.Store, uuid: str) -> list[int]:
    return [m.id for m in store.replay_agent(uuid).messages]


def say(store: ik.Store, agent: ik.Agent, content: str = "x", kind: str = "user") -> int:
    return store.append(agent.session_id, kind, content, agent_uuid=agent.uuid).id


@pytest.fixture
def sid(ikigai_store: ik.Store) -> int:
    return ikigai_store.create_session()


def test_root_single_range(ikigai_store: ik.Store, sid: int) -> None:
    """A root agent has one range (root, 0, None) and replays its own events."""
    store = ikigai_store
    root = store.create_agent(sid, name="main", provider="p", model="m", thinking_level="low")
    assert (root.session_id, root.parent_uuid, root.fork_message_id) == (sid, None, 0)
    assert (root.name, root.provider, root.model, root.thinking_level) == ("main", "p", "m", "low")
    assert root.status == "running"
    assert len(root.uuid) == 22
    a, b = say(store, root), say(store, root, kind="assistant")
    assert ranges(store, root.uuid) == [(root.uuid, 0, None)]
    assert ids(store, root.uuid) == [a, b]


def test_empty_history(ikigai_store: ik.Store, sid: int) -> None:
    """An agent with no events anywhere replays to nothing and has one empty-start range."""
    store = ikigai_store
    root = store.create_agent(sid)
    ctx = store.replay_agent(root.uuid)
    assert (ctx.messages, ctx.marks, ctx.skipped) == ([], [], [])
    assert ranges(store, root.uuid) == [(root.uuid, 0, None)]
    assert store._find_clear(root.uuid) == 0
    child = store.fork_agent(root.uuid)
    assert ids(store, child.uuid) == []
    assert ranges(store, child.uuid) == [(root.uuid, 0, 0), (child.uuid, 0, None)]


def test_child_two_ranges(ikigai_store: ik.Store, sid: int) -> None:
    """A child reads the parent up to the fork point, then its own events."""
    store = ikigai_store
    parent = store.create_agent(sid)
    p1, p2 = say(store, parent), say(store, parent)
    child = store.fork_agent(parent.uuid, name="child")
    assert (child.parent_uuid, child.fork_message_id, child.session_id) == (parent.uuid, p2, sid)
    c1 = say(store, child)
    assert ranges(store, child.uuid) == [(parent.uuid, 0, p2), (child.uuid, 0, None)]
    assert ids(store, child.uuid) == [p1, p2, c1]


def test_grandchild_order(ikigai_store: ik.Store, sid: int) -> None:
    """A grandchild's ranges and history run root, parent, itself."""
    store = ikigai_store
    root = store.create_agent(sid)
    r1 = say(store, root)
    parent = store.fork_agent(root.uuid)
    p1 = say(store, parent)
    leaf = store.fork_agent(parent.uuid)
    g1 = say(store, leaf)
    assert ranges(store, leaf.uuid) == [
        (root.uuid, 0, r1),
        (parent.uuid, 0, p1),
        (leaf.uuid, 0, None),
    ]
    assert ids(store, leaf.uuid) == [r1, p1, g1]


def test_walk_stops_at_clear(ikigai_store: ik.Store, sid: int) -> None:
    """A clear in the parent before the fork ends the walk there: the root is not read."""
    store = ikigai_store
    root = store.create_agent(sid)
    say(store, root)
    parent = store.fork_agent(root.uuid)
    say(store, parent)
    clear = store.clear(parent.uuid).id
    p3 = say(store, parent)
    leaf = store.fork_agent(parent.uuid)
    g1 = say(store, leaf)
    assert ranges(store, leaf.uuid) == [(parent.uuid, clear, p3), (leaf.uuid, 0, None)]
    assert ids(store, leaf.uuid) == [p3, g1]


def test_clear_in_middle_ancestor(ikigai_store: ik.Store, sid: int) -> None:
    """A clear in a middle ancestor hides everything above it for every descendant below it."""
    store = ikigai_store
    root = store.create_agent(sid)
    say(store, root)
    mid = store.fork_agent(root.uuid)
    clear = say(store, mid, kind="clear")
    m2 = say(store, mid)
    low = store.fork_agent(mid.uuid)
    l1 = say(store, low)
    leaf = store.fork_agent(low.uuid)
    f1 = say(store, leaf)
    assert ids(store, leaf.uuid) == [m2, l1, f1]
    assert ranges(store, leaf.uuid) == [
        (mid.uuid, clear, m2),
        (low.uuid, 0, l1),
        (leaf.uuid, 0, None),
    ]
    say(store, root, kind="clear")  # a later clear in the root changes nothing below it
    assert ids(store, leaf.uuid) == [m2, l1, f1]


def test_find_clear(ikigai_store: ik.Store, sid: int) -> None:
    """find_clear returns the newest own clear, bounded by max_id when given, else 0."""
    store = ikigai_store
    root = store.create_agent(sid)
    other = store.create_agent(sid)
    assert store._find_clear(root.uuid) == 0
    say(store, root)
    c1 = store.clear(root.uuid).id
    say(store, root)
    c2 = store.clear(root.uuid).id
    say(store, other, kind="clear")  # another agent's clear is not this agent's
    assert store._find_clear(root.uuid) == c2
    assert store._find_clear(root.uuid, max_id=c2) == c2
    assert store._find_clear(root.uuid, max_id=c2 - 1) == c1
    assert store._find_clear(root.uuid, max_id=c1) == c1
    assert store._find_clear(root.uuid, max_id=c1 - 1) == 0
    assert store._find_clear(root.uuid, max_id=0) == 0


def test_query_range_bounds(ikigai_store: ik.Store, sid: int) -> None:
    """query_range: start exclusive, end inclusive, end None unbounded, own events only."""
    store = ikigai_store
    a = store.create_agent(sid)
    b = store.create_agent(sid)
    e1, _, e3 = say(store, a), say(store, b), say(store, a)
    e4 = say(store, a)

    def q(start: int, end: int | None) -> list[int]:
        r = ik.ReplayRange(agent_uuid=a.uuid, start_id=start, end_id=end)
        return [m.id for m in store._query_range(r)]

    assert q(0, None) == [e1, e3, e4]
    assert q(e1, None) == [e3, e4]
    assert q(e1, e3) == [e3]
    assert q(0, e1) == [e1]
    assert q(e1, e1) == []
    assert q(0, 0) == []
    assert q(e4, None) == []


def test_deep_ancestry(ikigai_store: ik.Store, sid: int) -> None:
    """Five levels with two events each: every level in order, one range per level."""
    store = ikigai_store
    agent = store.create_agent(sid)
    chain, expected = [agent], []
    for level in range(5):
        if level:
            agent = store.fork_agent(agent.uuid)
            chain.append(agent)
        expected += [say(store, agent, f"{level}a"), say(store, agent, f"{level}b")]
    assert ids(store, agent.uuid) == expected
    got = ranges(store, agent.uuid)
    assert [r[0] for r in got] == [a.uuid for a in chain]
    assert [r[2] for r in got] == [*expected[1:-2:2], None]


def test_chain_of_500_forks(ikigai_store: ik.Store, sid: int) -> None:
    """Forking 500 times with one event per level: the leaf replays all 501 levels, root first."""
    store = ikigai_store
    agent = store.create_agent(sid)
    chain, expected = [agent.uuid], [say(store, agent, "0")]
    for level in range(1, 501):
        agent = store.fork_agent(agent.uuid)
        chain.append(agent.uuid)
        expected.append(say(store, agent, str(level)))
    ctx = store.replay_agent(agent.uuid)
    assert [m.id for m in ctx.messages] == expected
    assert [m.content for m in ctx.messages] == [str(i) for i in range(501)]
    got = ranges(store, agent.uuid)
    assert len(got) == 501
    assert [r[0] for r in got] == chain
    assert got == [(u, 0, end) for u, end in zip(chain, [*expected[:-1], None], strict=True)]


def test_fork_of_agent_without_own_events(ikigai_store: ik.Store, sid: int) -> None:
    """Fork point 0 inherits none of the parent's own events, but the grandparent part."""
    store = ikigai_store
    root = store.create_agent(sid)
    r1 = say(store, root)
    parent = store.fork_agent(root.uuid)
    child = store.fork_agent(parent.uuid)
    assert child.fork_message_id == 0
    say(store, parent)  # after the fork: 0 must not mean "no limit"
    say(store, root)
    c1 = say(store, child)
    assert ids(store, child.uuid) == [r1, c1]
    assert ranges(store, child.uuid) == [
        (root.uuid, 0, r1),
        (parent.uuid, 0, 0),
        (child.uuid, 0, None),
    ]


def test_parent_continues_after_fork(ikigai_store: ik.Store, sid: int) -> None:
    """What the parent appends after the fork is invisible to the child and vice versa."""
    store = ikigai_store
    parent = store.create_agent(sid)
    p1 = say(store, parent)
    child = store.fork_agent(parent.uuid)
    p2 = say(store, parent)
    c1 = say(store, child)
    p3 = say(store, parent)
    assert ids(store, child.uuid) == [p1, c1]
    assert ids(store, parent.uuid) == [p1, p2, p3]


def test_rewind_in_child_to_inherited_mark(ikigai_store: ik.Store, sid: int) -> None:
    """A child rewinds to a mark it inherited; the parent's context is unaffected."""
    store = ikigai_store
    parent = store.create_agent(sid)
    p1 = say(store, parent)
    m = store.mark(parent.uuid, "a").id
    p3 = say(store, parent)
    child = store.fork_agent(parent.uuid)
    rw = store.rewind(child.uuid, "a")
    assert rw.kind == "rewind"
    assert rw.agent_uuid == child.uuid
    assert rw.data["target_message_id"] == m
    c = store.replay_agent(child.uuid)
    assert [x.id for x in c.messages] == [p1, m, rw.id]
    assert c.marks == [ik.Mark(m, "a", 1)]
    p = store.replay_agent(parent.uuid)
    assert [x.id for x in p.messages] == [p1, m, p3]
    assert p.marks == [ik.Mark(m, "a", 1)]


def test_rewind_without_matching_mark_is_rejected(ikigai_store: ik.Store, sid: int) -> None:
    """store.rewind raises InvalidArgument when no mark on the current stack matches."""
    store = ikigai_store
    parent = store.create_agent(sid)
    child = store.fork_agent(parent.uuid)
    store.mark(parent.uuid, "late")  # after the fork: not on the child's stack
    with pytest.raises(ik.InvalidArgument):
        store.rewind(child.uuid, "late")
    with pytest.raises(ik.InvalidArgument):
        store.rewind(child.uuid)
    assert ids(store, child.uuid) == []


def test_killed_subtree(ikigai_store: ik.Store, sid: int) -> None:
    """kill_agent kills the subtree and returns it; dead agents leave running_agents, can't fork
    and take no more events (issue 6: they used to accept them silently)."""
    store = ikigai_store
    root = store.create_agent(sid)
    a = store.fork_agent(root.uuid)
    b = store.fork_agent(a.uuid)
    c = store.fork_agent(b.uuid)
    sibling = store.fork_agent(root.uuid)
    assert store.running_agents(sid)[0].uuid == root.uuid
    assert sorted(store.kill_agent(a.uuid)) == sorted([a.uuid, b.uuid, c.uuid])
    running = store.running_agents(sid)
    assert {x.uuid for x in running} == {root.uuid, sibling.uuid}
    assert [x.uuid for x in running].index(root.uuid) == 0
    for dead in (a, b, c):
        with pytest.raises(ik.InvalidArgument):
            store.fork_agent(dead.uuid)
    before = ids(store, b.uuid)
    with pytest.raises(ik.InvalidArgument, match="is dead"):
        say(store, b)
    assert ids(store, b.uuid) == before


def test_running_agents_parents_first(ikigai_store: ik.Store, sid: int) -> None:
    """running_agents lists every parent before its children and filters by session."""
    store = ikigai_store
    other = store.create_session()
    root = store.create_agent(sid)
    x = store.fork_agent(root.uuid)
    y = store.fork_agent(x.uuid)
    store.create_agent(other)
    listed = [a.uuid for a in store.running_agents(sid)]
    assert set(listed) == {root.uuid, x.uuid, y.uuid}
    assert listed.index(root.uuid) < listed.index(x.uuid) < listed.index(y.uuid)
    everywhere = [a.uuid for a in store.running_agents()]
    assert set(listed) < set(everywhere)


def test_append_to_agent_of_other_session_is_rejected(ikigai_store: ik.Store, sid: int) -> None:
    """An event naming an agent of another session (or no agent at all) raises, writes nothing."""
    store = ikigai_store
    other = store.create_session()
    agent = store.create_agent(other)
    with pytest.raises(ik.IkigaiStoreError):
        store.append(sid, "user", "x", agent_uuid=agent.uuid)
    with pytest.raises(ik.IkigaiStoreError):
        store.append(sid, "user", "x", agent_uuid="A" * 22)
    assert store.messages(sid) == []
