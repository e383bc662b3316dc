"""The reused cursors of ``ops.execute`` (issue 22): one pair per connection, made on first
use; a big result is not kept; a failed call leaves the connection's cursors usable."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import ikigai_store as ik

pytestmark = pytest.mark.db


@pytest.fixture
def store(ikigai_empty_db_url: str) -> Iterator[ik.Store]:
    """One connection, so every call reuses it."""
    with ik.open(ikigai_empty_db_url, pool_size=1) as opened:
        yield opened


def _conn_cursors(store: ik.Store) -> object:
    with store._pool.connection() as conn:
        return getattr(conn, "_ikigai_cursors", None)


def test_calls_reuse_one_pair_of_cursors(store: ik.Store) -> None:
    sid = store.create_session("cursors")
    store.append(sid, "user", "one")
    pair = _conn_cursors(store)
    assert pair is not None
    store.append(sid, "user", "two")
    assert store.get_session(sid) is not None
    assert _conn_cursors(store) is pair


def test_a_big_result_is_not_kept(store: ik.Store) -> None:
    sid = store.create_session("big")
    store.append_many(sid, [("user", f"m{i}", None) for i in range(100)])
    assert _conn_cursors(store) is None  # 100 rows back: more than a reused cursor keeps
    store.append(sid, "user", "small")
    assert _conn_cursors(store) is not None
    assert len(store.replay_session(sid).messages) == 101
    assert _conn_cursors(store) is None
    assert len(store.replay_session(sid).messages) == 101  # new cursors, dropped again
    assert _conn_cursors(store) is None


def test_a_failed_call_leaves_the_cursors_usable(store: ik.Store) -> None:
    sid = store.create_session("errors")
    first = store.append(sid, "user", "before")
    pair = _conn_cursors(store)
    with pytest.raises(ik.InvalidArgument):
        store.append(sid, "rewind", None, {"target_message_id": first.id})  # not a mark
    with pytest.raises(ik.NotFound):
        store.append(10**12, "user", "no such session")
    after = store.append(sid, "user", "after")
    assert after.id > first.id and _conn_cursors(store) is pair
    assert [m.content for m in store.replay_session(sid).messages] == ["before", "after"]


def test_async_calls_reuse_and_drop_cursors(ikigai_empty_db_url: str) -> None:
    async def main() -> None:
        async with ik.open_async(ikigai_empty_db_url, pool_size=1) as astore:
            sid = await astore.create_session("async")
            await astore.append_many(sid, [("user", f"m{i}", None) for i in range(100)])
            async with astore._pool.connection() as conn:
                assert getattr(conn, "_ikigai_cursors", None) is None
            await astore.append(sid, "user", "x")
            async with astore._pool.connection() as conn:
                pair = getattr(conn, "_ikigai_cursors", None)
            assert pair is not None
            await astore.append(sid, "user", "y")
            async with astore._pool.connection() as conn:
                assert getattr(conn, "_ikigai_cursors", None) is pair
            assert len((await astore.replay_session(sid)).messages) == 102
            async with astore._pool.connection() as conn:
                assert getattr(conn, "_ikigai_cursors", None) is None

    asyncio.run(main())


def test_lease_calls_read_binary_tuples_into_the_model(store: ik.Store) -> None:
    """acquire/renew/release read their row into ``Lease`` (typed) on the reused cursors."""
    store.identities.register("tupler")
    lease = store.leases.acquire("tupler", "file:/t", ttl=60)
    pair = _conn_cursors(store)
    assert pair is not None
    assert isinstance(lease, ik.Lease) and type(lease.id) is int and lease.exclusive is True
    assert lease.holder == "tupler" and lease.expires_at.tzinfo is not None
    assert isinstance(lease.token, str) and lease.expires_at > lease.acquired_at
    renewed = store.leases.renew(lease, 120)
    assert (renewed.id, renewed.token, renewed.acquired_at) == (
        lease.id,
        lease.token,
        lease.acquired_at,
    )
    assert store.leases.held(holder="tupler") == [renewed]
    assert store.leases.release(lease) is True
    assert store.leases.release(lease) is False
    assert _conn_cursors(store) is pair


def test_a_model_row_of_other_columns_is_refused(store: ik.Store) -> None:
    """``model_row`` refuses a query whose first columns are not the model's fields."""
    from ikigai_store import ops

    def op() -> ops.Op[object]:
        row = yield ops.model_row("leases_identity_exists", ik.Lease, holder="nobody")
        return row

    with pytest.raises(TypeError, match="does not select Lease's columns"):
        store._run(op())
