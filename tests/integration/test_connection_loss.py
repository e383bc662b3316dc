"""Connection loss: the failing call raises ConnectionLost, writes nothing; the next call works."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import ikigai_store as ik
from tests.faces import LoopThread, SyncView

pytestmark = pytest.mark.db


@pytest.fixture(params=["sync", "async"])
def store(
    request: pytest.FixtureRequest, ikigai_db_url: str, loop_thread: LoopThread
) -> Iterator[Any]:
    """A committing store with a pool of 2, on each face."""
    if request.param == "sync":
        with ik.Store(ikigai_db_url, pool_size=2) as store:
            yield store
            store._truncate_all()
        return
    astore = loop_thread.call(ik.AsyncStore.connect(ikigai_db_url, pool_size=2))
    view = SyncView(astore, loop_thread)
    yield view
    view._truncate_all()
    loop_thread.call(astore.close())


def _kill_backends(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_terminated_backend_raises_then_reconnects(store: ik.Store, ikigai_db_url: str) -> None:
    """After pg_terminate_backend the next call raises ConnectionLost; the one after succeeds."""
    sid = store.create_session()
    store.append(sid, "user", "before")
    assert _kill_backends(ikigai_db_url) >= 1
    with pytest.raises(ik.ConnectionLost):
        store.append(sid, "user", "lost")
    store.append(sid, "user", "after")
    assert [m.content for m in store.messages(sid)] == ["before", "after"]


def test_loss_inside_transaction_writes_nothing(store: ik.Store, ikigai_db_url: str) -> None:
    """A connection lost inside store.transaction() leaves none of the block's writes."""
    sid = store.create_session()
    with pytest.raises(ik.ConnectionLost), store.transaction():
        store.append(sid, "user", "one")
        store.append(sid, "assistant", "two")
        _kill_backends(ikigai_db_url)
        store.append(sid, "user", "three")
    assert store.messages(sid) == []
    store.append(sid, "user", "retried")
    assert [m.content for m in store.messages(sid)] == ["retried"]


def test_reads_recover_too(store: ik.Store, ikigai_db_url: str) -> None:
    """Reads raise ConnectionLost once and then work again."""
    sid = store.create_session()
    _kill_backends(ikigai_db_url)
    with pytest.raises(ik.ConnectionLost):
        store.replay_session(sid)
    assert store.replay_session(sid).messages == []


def test_unreachable_server_is_connect_error() -> None:
    """An unreachable server raises ConnectError without the password in the message."""
    with pytest.raises(ik.ConnectError) as info:
        ik.open("postgresql://user:hunter2@127.0.0.1:1/nowhere")
    assert "hunter2" not in str(info.value)
    assert "***" in str(info.value)
