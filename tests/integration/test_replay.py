"""Session replay: the seed examples, clear boundaries, skipped rewinds."""

from __future__ import annotations

import re

import pytest

import ikigai_store as ik

pytestmark = pytest.mark.db


def _seed(store: ik.Store) -> tuple[int, list[ik.Message]]:
    sid = store.create_session()
    msgs = [
        store.append(sid, "user", "Feature X"),
        store.append(sid, "assistant", "Approach A..."),
        store.append(sid, "mark", "approach-a", {"label": "approach-a"}),
        store.append(sid, "user", "Try B"),
        store.append(sid, "assistant", "Approach B..."),
    ]
    msgs.append(
        store.append(
            sid,
            "rewind",
            "approach-a",
            {"target_message_id": msgs[2].id, "target_label": "approach-a"},
        )
    )
    msgs += [store.append(sid, "user", "Improve A"), store.append(sid, "assistant", "Improved A")]
    return sid, msgs


def test_seed_example(ikigai_store: ik.Store) -> None:
    """Seed 003: context is events [1, 2, 3, 6, 7, 8] and the mark stays, all 8 are kept."""
    sid, m = _seed(ikigai_store)
    ctx = ikigai_store.replay_session(sid)
    assert ctx.message_ids == [m[i].id for i in (0, 1, 2, 5, 6, 7)]
    assert ctx.marks == [ik.Mark(m[2].id, "approach-a", 2)]
    assert ctx.skipped == []
    assert len(ikigai_store.messages(sid)) == 8


def test_clear_resets_context_and_marks(ikigai_store: ik.Store) -> None:
    """After a clear only later events count and earlier marks are gone."""
    sid, _ = _seed(ikigai_store)
    ikigai_store.append(sid, "clear")
    after = ikigai_store.append(sid, "user", "New topic")
    ctx = ikigai_store.replay_session(sid)
    assert ctx.message_ids == [after.id]
    assert ctx.marks == []


def test_rewind_to_cleared_mark_is_skipped(ikigai_store: ik.Store) -> None:
    """A rewind whose mark was cleared away is skipped and reported, not fatal."""
    sid, m = _seed(ikigai_store)
    ikigai_store.append(sid, "clear")
    u = ikigai_store.append(sid, "user", "x")
    rw = ikigai_store.append(sid, "rewind", None, {"target_message_id": m[2].id})
    ctx = ikigai_store.replay_session(sid)
    assert ctx.message_ids == [u.id]
    assert ctx.skipped == [rw.id]


def test_rewind_past_mark_then_stale_rewind_skipped(ikigai_store: ik.Store) -> None:
    """Rewinding to an earlier mark drops later marks; a rewind to a dropped mark is skipped."""
    sid = ikigai_store.create_session()
    a = ikigai_store.append(sid, "mark", None, {"label": "a"})
    ikigai_store.append(sid, "user", "1")
    b = ikigai_store.append(sid, "mark", None, {"label": "b"})
    ikigai_store.append(sid, "user", "2")
    r1 = ikigai_store.append(sid, "rewind", None, {"target_message_id": a.id})
    r2 = ikigai_store.append(sid, "rewind", None, {"target_message_id": b.id})
    r3 = ikigai_store.append(sid, "rewind", None, {"target_message_id": a.id})
    ctx = ikigai_store.replay_session(sid)
    assert ctx.message_ids == [a.id, r3.id]
    assert ctx.marks == [ik.Mark(a.id, "a", 0)]
    assert ctx.skipped == [r2.id]
    assert r1.id not in ctx.message_ids


def test_unlabelled_and_nonstring_labels(ikigai_store: ik.Store) -> None:
    """A mark's label is data.label when it is a string, else None."""
    sid = ikigai_store.create_session()
    a = ikigai_store.append(sid, "mark", "shown", None)
    b = ikigai_store.append(sid, "mark", None, {"label": None, "number": 1})
    ctx = ikigai_store.replay_session(sid)
    assert ctx.marks == [ik.Mark(a.id, None, 0), ik.Mark(b.id, None, 1)]


def test_empty_session_replays_empty(ikigai_store: ik.Store) -> None:
    """A session without events replays to an empty context."""
    sid = ikigai_store.create_session()
    ctx = ikigai_store.replay_session(sid)
    assert ctx.messages == [] and ctx.marks == [] and ctx.skipped == []


def test_sessions_are_independent(ikigai_store: ik.Store) -> None:
    """A clear in one session does not affect another."""
    s1, s2 = ikigai_store.create_session(), ikigai_store.create_session()
    a = ikigai_store.append(s1, "user", "one")
    ikigai_store.append(s2, "clear")
    b = ikigai_store.append(s2, "user", "two")
    assert ikigai_store.replay_session(s1).message_ids == [a.id]
    assert ikigai_store.replay_session(s2).message_ids == [b.id]


def test_replay_reads_only_after_last_clear(ikigai_store: ik.Store) -> None:
    """The replay query's plan probes the clear index and reads the id range, not the history."""
    sid = ikigai_store.create_session()
    ikigai_store.append(sid, "user", "old")
    ikigai_store.append(sid, "clear")
    with ikigai_store._connection() as conn:
        conn.execute("SET LOCAL enable_seqscan = off")
        sql = ik.queries.session_live_events.sql.rstrip().rstrip(";")
        plan = "\n".join(
            r["QUERY PLAN"] for r in conn.execute("EXPLAIN " + sql, {"session_id": sid})
        )
    assert "idx_messages_session_clear" in plan
    assert re.search(r"idx_messages_session(?!_)", plan), plan
    assert "messages_pkey" not in plan, plan
