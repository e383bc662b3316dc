"""Ended sessions and dead agents take no writes; agent zero is never dead (issue 6, item 12)."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import psycopg
import pytest

import ikigai_store as ik
from tests.locks import waiting_on_a_lock

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


def _blocked(url: str, sql: str, params: dict[str, object]) -> bool:
    """Whether ``sql`` has to wait for a row lock held by another open transaction (it gives
    up after 200 ms of waiting: lock_timeout, no timing measured)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '200ms'")
        try:
            conn.execute(sql, params)
        except psycopg.errors.LockNotAvailable:
            return True
        return False


def test_end_session_and_appends_wait_for_each_other(ikigai_db_url: str) -> None:
    """Appends lock their session FOR KEY SHARE (migration 0024): end_session, batch appends
    and session_wait_appends wait for an open append; an append waits for an open end_session
    and then finds the session ended; a listener registration and a title change wait for
    neither."""
    q = ik.queries
    sid_param = {"kind": "user", "content": "x", "data": None}
    with ik.Store(ikigai_db_url, pool_size=2) as store, psycopg.connect(ikigai_db_url) as held:
        sid = store.create_session("locks")
        held.execute(q.append_event.sql, {"session_id": sid, **sid_param})  # open transaction
        assert _blocked(ikigai_db_url, q.end_session.sql, {"session_id": sid})
        assert _blocked(ikigai_db_url, q.session_wait_appends.sql, {"session_id": sid})
        batch = {"session_id": sid, "kinds": ["user"], "contents": ["b"], "datas": [None]}
        assert _blocked(ikigai_db_url, q.append_events.sql, batch)
        listener = {"session_ids": [sid], "listener": uuid.uuid4(), "ttl": timedelta(minutes=1)}
        assert not _blocked(ikigai_db_url, q.session_listeners_register.sql, listener)
        title = {"session_id": sid, "title": "renamed"}
        assert not _blocked(ikigai_db_url, q.set_session_title.sql, title)
        held.rollback()

        held.execute(q.end_session.sql, {"session_id": sid})  # open transaction
        assert _blocked(ikigai_db_url, q.append_event.sql, {"session_id": sid, **sid_param})
        refused: list[object] = []

        def append() -> None:
            with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
                params = {"session_id": sid, **sid_param}
                try:
                    conn.execute(q.append_event.sql, params)
                except psycopg.Error as exc:  # migration 0040: a refused append raises
                    refused.append((exc.sqlstate, exc.diag.message_primary))

        waiter = threading.Thread(target=append)
        waiter.start()
        deadline = time.monotonic() + 10
        while not waiting_on_a_lock(ikigai_db_url) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert waiting_on_a_lock(ikigai_db_url), "the append did not wait for end_session"
        held.commit()
        waiter.join()
        ended = f"session {sid} has ended: it accepts no more events"
        assert refused == [("IK400", ended)] and store.count_messages(sid) == 0


def test_an_append_draws_its_id_only_once_it_holds_the_session(ikigai_db_url: str) -> None:
    """An append draws its id after it locks its session (migration 0040: the id is
    ikigai_append_id(), which locks first). While a reader holds the session FOR UPDATE, as
    session_wait_appends does, an append waits without having taken an id: nothing can later
    commit below the ids the reader saw."""
    q = ik.queries
    params = {"kind": "user", "content": "x", "data": None}
    with ik.Store(ikigai_db_url, pool_size=1) as store, psycopg.connect(ikigai_db_url) as held:
        sid = store.create_session("id after lock")
        store.append(sid, "user", "before")
        held.execute(q.session_wait_appends.sql, {"session_id": sid})  # open transaction
        seen = store.messages(sid)[-1].id
        stored: list[int] = []

        def append() -> None:
            with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
                row = conn.execute(q.append_event.sql, {"session_id": sid, **params}).fetchone()
                assert row is not None
                stored.append(int(row[0]))

        waiter = threading.Thread(target=append)
        waiter.start()
        deadline = time.monotonic() + 10
        while not waiting_on_a_lock(ikigai_db_url) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert waiting_on_a_lock(ikigai_db_url), "the append did not wait for the session"
        # Draw an id now: had the waiting append drawn its own already, the append's would be
        # lower than this one.
        probe = held.execute("SELECT nextval(pg_get_serial_sequence('messages', 'id'))").fetchone()
        assert probe is not None
        held.commit()
        waiter.join()
        assert stored and stored[0] > int(probe[0]) > seen
