"""Mail across connections: idempotency races, wait wake-ups, competing waiters (committed)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import ikigai_store as ik

pytestmark = pytest.mark.db


@pytest.fixture
def store(ikigai_empty_db_url: str) -> Iterator[ik.Store]:
    """A store on a fresh database whose writes commit, with alice and bob."""
    with ik.open(ikigai_empty_db_url, pool_size=10) as opened:
        opened.identities.register("alice")
        opened.identities.register("bob")
        yield opened


def _in_threads(n: int, target: object) -> None:
    threads = [threading.Thread(target=target) for _ in range(n)]  # type: ignore[arg-type]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)


def test_same_key_from_8_threads_is_one_mail(store: ik.Store) -> None:
    """8 threads sending one request with one key at once: one row, all get that mail."""
    barrier = threading.Barrier(8)
    got: list[ik.Mail] = []

    def send() -> None:
        barrier.wait()
        got.append(store.mail.send("alice", ["bob"], "s", "b", idempotency_key="once"))

    _in_threads(8, send)
    assert len(got) == 8 and len({m.id for m in got}) == 1
    assert len(store.mail.inbox("bob")) == 1


def test_concurrent_senders_lose_nothing(store: ik.Store) -> None:
    """8 threads x 40 sends to one recipient: every mail delivered once."""

    def send() -> None:
        for n in range(40):
            store.mail.send("alice", ["bob"], threading.current_thread().name, str(n))

    _in_threads(8, send)
    inbox = store.mail.inbox("bob", limit=1000)
    assert len(inbox) == 320 == len({i.mail.id for i in inbox})
    assert store.mail.counts("bob").unread == 320


def test_wait_wakes_on_another_connections_commit(store: ik.Store) -> None:
    """A waiter returns the mail sent by another thread, long before its timeout."""
    result: list[ik.InboxItem | None] = []
    waiter = threading.Thread(target=lambda: result.append(store.mail.wait("bob", 30)))
    waiter.start()
    time.sleep(0.3)
    sent = store.mail.send("alice", ["bob"], "wake", "up")
    started = time.monotonic()
    waiter.join(timeout=30)
    assert result and result[0] is not None
    assert (result[0].mail.id, result[0].state) == (sent.id, "read")
    assert time.monotonic() - started < 10  # woken, not timed out
    assert store.mail.counts("bob").unread == 0


def test_wait_times_out_with_none(store: ik.Store) -> None:
    """With nothing for it, wait returns None after its timeout (and not much before)."""
    started = time.monotonic()
    assert store.mail.wait("bob", 0.3) is None
    assert time.monotonic() - started >= 0.3
    store.mail.send("alice", ["alice"], "s", "to myself")
    assert store.mail.wait("bob", 0.1) is None  # mail for others does not count


def test_competing_waiters_never_share_a_mail(store: ik.Store) -> None:
    """4 waiters on one identity and 20 mails: each mail goes to exactly one waiter."""
    taken: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        while True:
            item = store.mail.wait("bob", 2)
            if item is None:
                return
            with lock:
                taken.append(item.mail.id)

    consumers = [threading.Thread(target=consume) for _ in range(4)]
    for c in consumers:
        c.start()
    sent = [store.mail.send("alice", ["bob"], "job", str(n)).id for n in range(20)]
    for c in consumers:
        c.join(timeout=60)
    assert sorted(taken) == sorted(sent)


def test_wait_wakes_when_a_snooze_passes(store: ik.Store) -> None:
    """A snoozed mail wakes a waiter when its time passes, with no send and no job."""
    mail = store.mail.send("alice", ["bob"], "later", "b")
    store.mail.set_state("bob", mail.id, "snoozed", snoozed_until=timedelta(seconds=0.5))
    item = store.mail.wait("bob", 10)
    assert item is not None and item.mail.id == mail.id


def test_wait_inside_a_transaction_rolls_back(store: ik.Store) -> None:
    """Inside store.transaction() the mail is marked read in that transaction only."""
    mail = store.mail.send("alice", ["bob"], "s", "b")

    class Undo(Exception):
        pass

    with pytest.raises(Undo), store.transaction():
        item = store.mail.wait("bob", 1)
        assert item is not None and item.mail.id == mail.id
        raise Undo
    assert [i.state for i in store.mail.inbox("bob")] == ["unread"]


def test_wait_validates_and_needs_an_identity(store: ik.Store) -> None:
    """A bad timeout is InvalidArgument; an unknown identity NotFound; neither waits."""
    for bad in (-1, float("nan"), 86401, True, "1"):
        with pytest.raises(ik.InvalidArgument):
            store.mail.wait("bob", bad)  # type: ignore[arg-type]
    with pytest.raises(ik.NotFound):
        store.mail.wait("ghost", 5)


def test_async_wait_wakes_and_waiters_do_not_hold_pool_connections(
    ikigai_empty_db_url: str,
) -> None:
    """AsyncStore: 6 tasks wait on a pool of 2 (waiters hold no pooled connection) and each
    wakes with its own mail."""

    async def main() -> list[int]:
        async with ik.open_async(ikigai_empty_db_url, pool_size=2) as astore:
            names = [f"w{n}" for n in range(6)]
            for name in [*names, "boss"]:
                await astore.identities.register(name)
            waiters = [asyncio.create_task(astore.mail.wait(n, 20)) for n in names]
            await asyncio.sleep(0.3)
            sent = [(await astore.mail.send("boss", [n], "go", "b")).id for n in names]
            got = await asyncio.wait_for(asyncio.gather(*waiters), 20)
            assert [g.mail.id if g else None for g in got] == sent
            return sent

    assert len(asyncio.run(main())) == 6


def test_sync_waiters_do_not_hold_pool_connections(ikigai_empty_db_url: str) -> None:
    """Store: 4 threads waiting on a pool of 1 leave it free for a sender."""
    with ik.open(ikigai_empty_db_url, pool_size=1, timeout=5) as small:
        for name in ("a", "b", "c", "d", "boss"):
            small.identities.register(name)
        results: dict[str, ik.InboxItem | None] = {}

        def wait(name: str) -> None:
            results[name] = small.mail.wait(name, 20)

        threads = [threading.Thread(target=wait, args=(n,)) for n in "abcd"]
        for t in threads:
            t.start()
        time.sleep(0.3)
        for name in "abcd":
            small.mail.send("boss", [name], "go", name)
        for t in threads:
            t.join(timeout=30)
        assert {n: r.mail.body if r else None for n, r in results.items()} == {n: n for n in "abcd"}


def test_waiter_survives_a_lost_listener_connection(store: ik.Store) -> None:
    """When the LISTEN connection is killed, the listener reconnects and the waiter still
    wakes for mail sent afterwards (notifications sent meanwhile are not relied on)."""
    result: list[ik.InboxItem | None] = []
    waiter = threading.Thread(target=lambda: result.append(store.mail.wait("bob", 30)))
    waiter.start()
    deadline = time.monotonic() + 10
    while not store._listener.listening and time.monotonic() < deadline:
        time.sleep(0.05)
    with store._connection() as conn:
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        ).fetchone()
    assert killed is not None and killed["n"] == 1
    sent = store.mail.send("alice", ["bob"], "after", "the outage")
    started = time.monotonic()
    waiter.join(timeout=30)
    assert result and result[0] is not None and result[0].mail.id == sent.id
    assert time.monotonic() - started < 10  # woken, not found at the 30 s timeout


def test_close_wakes_waiters_with_store_closed(ikigai_empty_db_url: str) -> None:
    """Closing a store while a thread waits ends that wait with StoreClosed, not a hang."""
    store = ik.open(ikigai_empty_db_url)
    store.identities.register("bob")
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            store.mail.wait("bob", 30)
        except ik.IkigaiStoreError as exc:
            errors.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.5)
    store.close()
    waiter.join(timeout=10)
    assert not waiter.is_alive()
    assert [type(e) for e in errors] == [ik.StoreClosed]


def _heard(conn: psycopg.Connection[Any], action: Callable[[], object]) -> list[str]:
    """The ikigai_mail payloads ``conn`` (listening) hears for ``action``'s commits."""
    for _ in conn.notifies(timeout=0):
        pass  # what was heard before
    action()
    return [note.payload for note in conn.notifies(timeout=0.3)]


def test_only_updates_that_make_mail_unread_notify(
    store: ik.Store, ikigai_empty_db_url: str
) -> None:
    """State changes notify ikigai_mail with the identity's id exactly when a row becomes
    unread (one notification per identity per transaction); claims, reads, archiving do not."""
    bob = store.identities.get("bob").id
    mails = [store.mail.send("alice", ["bob"], "s", str(n)) for n in range(3)]
    with psycopg.connect(ikigai_empty_db_url, autocommit=True) as conn:
        conn.execute("LISTEN ikigai_mail")
        assert _heard(conn, lambda: store.mail.wait("bob", 0)) == []  # the claim
        assert _heard(conn, lambda: store.mail.read("bob", mails[1].id)) == []
        assert _heard(conn, lambda: store.mail.set_state("bob", mails[2].id, "archived")) == []
        assert _heard(conn, lambda: store.mail.set_state("bob", mails[0].id, "unread")) == [
            str(bob)
        ]
        thread = mails[1].thread_id
        assert _heard(conn, lambda: store.mail.set_thread_state("bob", thread, "unread")) == [
            str(bob)
        ]
        both = [mails[0].id, mails[1].id]

        def all_read_then_unread() -> None:
            with store.transaction():
                for mail_id in both:
                    store.mail.set_state("bob", mail_id, "read")
                for mail_id in both:
                    store.mail.set_state("bob", mail_id, "unread")

        assert _heard(conn, all_read_then_unread) == [str(bob)]  # folded into one


def test_set_state_unread_wakes_a_waiter(store: ik.Store) -> None:
    """A mail moved back to unread by another thread wakes a waiter, which gets it."""
    mail = store.mail.send("alice", ["bob"], "s", "b")
    store.mail.read("bob", mail.id)
    result: list[ik.InboxItem | None] = []
    waiter = threading.Thread(target=lambda: result.append(store.mail.wait("bob", 30)))
    waiter.start()
    time.sleep(0.3)
    store.mail.set_state("bob", mail.id, "unread")
    started = time.monotonic()
    waiter.join(timeout=30)
    assert result and result[0] is not None and result[0].mail.id == mail.id
    assert time.monotonic() - started < 10  # woken, not timed out
