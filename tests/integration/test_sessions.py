"""Sessions (Model B): create, active lookup, end, titles, listing."""

from __future__ import annotations

import pytest

import ikigai_store as ik

pytestmark = pytest.mark.db


def test_create_and_get_session(ikigai_store: ik.Store) -> None:
    """A new session is active, untitled unless given a title, and readable by id."""
    sid = ikigai_store.create_session("first")
    session = ikigai_store.get_session(sid)
    assert session.id == sid
    assert session.title == "first"
    assert session.ended_at is None
    assert ikigai_store.get_active_session() == sid


def test_active_session_is_newest_unended(ikigai_store: ik.Store) -> None:
    """get_active_session returns the newest session still open, None when all ended."""
    assert ikigai_store.get_active_session() is None
    a = ikigai_store.create_session()
    b = ikigai_store.create_session()  # same transaction: same started_at, id breaks the tie
    assert ikigai_store.get_active_session() == b
    ikigai_store.end_session(b)
    assert ikigai_store.get_active_session() == a
    ikigai_store.end_session(a)
    assert ikigai_store.get_active_session() is None


def test_end_session_is_idempotent(ikigai_store: ik.Store) -> None:
    """Ending a session twice keeps the first ended_at."""
    sid = ikigai_store.create_session()
    ikigai_store.end_session(sid)
    first = ikigai_store.get_session(sid).ended_at
    ikigai_store.end_session(sid)
    assert ikigai_store.get_session(sid).ended_at == first is not None


def test_titles(ikigai_store: ik.Store) -> None:
    """set_session_title sets and clears a title."""
    sid = ikigai_store.create_session()
    ikigai_store.set_session_title(sid, "named")
    assert ikigai_store.get_session(sid).title == "named"
    ikigai_store.set_session_title(sid, None)
    assert ikigai_store.get_session(sid).title is None


def test_list_sessions_newest_first(ikigai_store: ik.Store) -> None:
    """list_sessions returns newest first and honours limit."""
    ids = [ikigai_store.create_session(str(i)) for i in range(5)]
    assert [s.id for s in ikigai_store.list_sessions()] == ids[::-1]
    assert [s.id for s in ikigai_store.list_sessions(limit=2)] == ids[:2:-1][:2]


@pytest.mark.parametrize("bad", [0, -1, True, "1", 1.0, None, 2**63])
def test_bad_session_ids_are_invalid(ikigai_store: ik.Store, bad: object) -> None:
    """Non-positive, non-integer or out-of-range ids raise InvalidArgument."""
    for call in (
        ikigai_store.get_session,
        ikigai_store.end_session,
        ikigai_store.messages,
        ikigai_store.replay_session,
    ):
        with pytest.raises(ik.InvalidArgument):
            call(bad)  # type: ignore[arg-type]


def test_missing_session_is_not_found(ikigai_store: ik.Store) -> None:
    """Reading, ending or titling an unknown session raises NotFound (a LookupError)."""
    with pytest.raises(ik.NotFound):
        ikigai_store.get_session(999_999)
    with pytest.raises(LookupError):
        ikigai_store.end_session(999_999)
    with pytest.raises(ik.NotFound):
        ikigai_store.set_session_title(999_999, "x")
    with pytest.raises(ik.NotFound):
        ikigai_store.messages(999_999)
    with pytest.raises(ik.NotFound):
        ikigai_store.replay_session(999_999)


def test_title_with_nul_rejected(ikigai_store: ik.Store) -> None:
    """A title containing NUL is rejected and no session is created."""
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.create_session("a\x00b")
    assert ikigai_store.list_sessions() == []


def test_sessions_a_runtime_owns_are_never_active(ikigai_module_store: ik.Store) -> None:
    """A LangGraph thread and a keyed session (the OpenAI Agents SDK's) stay open but are never
    the active session: the runtime's own, older, is (a Claude Agent SDK transcript:
    test_claude_agent.py)."""
    from langgraph.checkpoint.base import empty_checkpoint

    from ikigai_store.integrations.langgraph import IkigaiSaver

    store = ikigai_module_store
    with store.transaction(force_rollback=True):
        mine = store.create_session("the runtime's")
        keyed = store.session_for_key("openai-agents", "sdk-session")
        config = {"configurable": {"thread_id": "a-thread", "checkpoint_ns": ""}}
        IkigaiSaver(store).put(config, empty_checkpoint(), {}, {})  # type: ignore[arg-type]
        thread = store.list_sessions(limit=1)[0]
        assert thread.title is not None and "a-thread" in thread.title
        assert mine < keyed < thread.id
        assert store.get_active_session() == mine
        store.end_session(mine)
        assert store.get_active_session() is None
