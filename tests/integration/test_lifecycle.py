"""Ended sessions and dead agents take no writes; agent zero is never dead (issue 6, item 12)."""

from __future__ import annotations

import threading

import pytest

import ikigai_store as ik

pytestmark = pytest.mark.db


def test_ended_session_takes_no_events(ikigai_store: ik.Store) -> None:
    """append to an ended session raises InvalidArgument naming it and writes nothing."""
    sid = ikigai_store.create_session()
    mark = ikigai_store.append(sid, "mark", "m", {"label": "m"})
    ikigai_store.end_session(sid)
    for kind, data in (("user", None), ("rewind", {"target_message_id": mark.id})):
        with pytest.raises(ik.InvalidArgument, match="has ended"):
            ikigai_store.append(sid, kind, "late", data)
    assert ikigai_store.count_messages(sid) == 1


def test_ended_session_takes_no_agents(ikigai_store: ik.Store) -> None:
    """create_agent, fork_agent and ensure_root_agent refuse an ended session."""
    sid = ikigai_store.create_session()
    root = ikigai_store.create_agent(sid)
    ikigai_store.end_session(sid)
    with pytest.raises(ik.InvalidArgument, match="has ended"):
        ikigai_store.create_agent(sid)
    with pytest.raises(ik.InvalidArgument, match="has ended"):
        ikigai_store.fork_agent(root.uuid)
    with pytest.raises(ik.InvalidArgument, match="has ended"):
        ikigai_store.ensure_root_agent(sid)
    assert [a.uuid for a in ikigai_store.running_agents(sid)] == [root.uuid]


def test_dead_agent_takes_no_events_but_agent_killed_goes_first(ikigai_store: ik.Store) -> None:
    """The documented order: append agent_killed, then kill_agent; afterwards appends fail."""
    sid = ikigai_store.create_session()
    agent = ikigai_store.create_agent(sid)
    ikigai_store.append(sid, "agent_killed", "bye", agent_uuid=agent.uuid)
    ikigai_store.kill_agent(agent.uuid)
    with pytest.raises(ik.InvalidArgument, match="is dead"):
        ikigai_store.append(sid, "user", "late", agent_uuid=agent.uuid)
    with pytest.raises(ik.InvalidArgument, match="is dead"):
        ikigai_store.mark(agent.uuid, "late")
    ikigai_store.reap_agent(agent.uuid)
    with pytest.raises(ik.InvalidArgument, match="is reaped"):
        ikigai_store.clear(agent.uuid)
    assert [m.kind for m in ikigai_store.messages(sid)] == ["agent_killed"]


def test_agent_zero_is_never_dead(ikigai_store: ik.Store) -> None:
    """ensure_root_agent skips a dead root: a new running root is created, then reused."""
    sid = ikigai_store.create_session()
    first = ikigai_store.ensure_root_agent(sid)
    ikigai_store.kill_agent(first.uuid)
    second = ikigai_store.ensure_root_agent(sid, name="zero again")
    assert second.uuid != first.uuid
    assert (second.status, second.name, second.parent_uuid) == ("running", "zero again", None)
    assert ikigai_store.ensure_root_agent(sid).uuid == second.uuid


@pytest.mark.slow
def test_no_event_commits_after_its_session_ended(ikigai_db_url: str) -> None:
    """Appends racing end_session: once end_session returns, no further event is ever stored."""
    with ik.Store(ikigai_db_url, pool_size=4) as store:
        for _ in range(5):
            sid = store.create_session()
            stop = threading.Event()

            def writer(sid: int = sid, stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    try:
                        store.append(sid, "user", "x")
                    except ik.InvalidArgument:  # the session has ended
                        return

            threads = [threading.Thread(target=writer) for _ in range(3)]
            for t in threads:
                t.start()
            while store.count_messages(sid) < 20:
                pass
            store.end_session(sid)
            at_end = store.count_messages(sid)
            stop.set()
            for t in threads:
                t.join()
            assert store.count_messages(sid) == at_end
        store._truncate_all()
