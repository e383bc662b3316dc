"""Mail hand-off (migration 0026): a send gives its mail to a sleeping waiter in the sender's
transaction; every failure point leaves the mail delivered exactly once or unread again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

import ikigai_store as ik
from ikigai_store import mail, ops
from ikigai_store.aio import _AsyncSteps
from ikigai_store.notify import Handoff
from ikigai_store.store import _Steps

pytestmark = pytest.mark.db


@pytest.fixture
def store(ikigai_empty_db_url: str) -> Iterator[ik.Store]:
    """A store on a fresh database whose writes commit, with alice and bob."""
    with ik.open(ikigai_empty_db_url, pool_size=10) as opened:
        opened.identities.register("alice")
        opened.identities.register("bob")
        yield opened


def _q(store: ik.Store, sql: str) -> list[dict[str, Any]]:
    with store._connection() as conn:
        return list(conn.execute(sql).fetchall())


def _registrations(store: ik.Store) -> list[dict[str, Any]]:
    return _q(store, "SELECT * FROM mail_waiters ORDER BY id")


def _until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` (not a timing assertion: a generous bound against hangs)."""
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def _state(store: ik.Store, mail_id: int, identity: str = "bob") -> str:
    rows = _q(
        store,
        "SELECT r.state FROM mail_recipients AS r JOIN identities AS i ON i.id = r.identity_id "
        f"WHERE i.name = '{identity}' AND r.mail_id = {int(mail_id)}",
    )
    return str(rows[0]["state"])


def test_send_hands_the_mail_over_in_its_own_commit(store: ik.Store) -> None:
    """With a waiter asleep, the send's commit already marks the mail read and names it in
    the waiter's registration; the waiter returns it (as the inbox shows it) and its
    registration is gone."""
    result: list[ik.InboxItem | None] = []
    waiter = threading.Thread(target=lambda: result.append(store.mail.wait("bob", 30)))
    waiter.start()
    _until(lambda: len(_registrations(store)) == 1, "the registration")
    sent = store.mail.send("alice", ["bob"], "hand", "off")
    assert _state(store, sent.id) == "read"  # before the waiter did anything: the send's commit
    waiter.join(timeout=30)
    assert result and result[0] is not None
    assert (result[0].mail.id, result[0].state) == (sent.id, "read")
    assert result[0].read_at is not None
    _until(lambda: _registrations(store) == [], "the listener to delete the registration")
    counts = store.mail.counts("bob")
    assert counts.unread == 0 and store.mail.inbox("bob") == [result[0]]  # the same columns


def test_no_registration_inside_a_transaction_or_without_timeout(store: ik.Store) -> None:
    """Inside store.transaction() and with timeout=0, wait keeps the claim path: no
    registration is made, and a pending mail is claimed as before."""
    assert store.mail.wait("bob", 0) is None
    with store.transaction():
        assert store.mail.wait("bob", 0.2) is None
        assert _registrations(store) == []
    sent = store.mail.send("alice", ["bob"], "s", "b")
    assert _state(store, sent.id) == "unread"  # nobody waiting: nothing handed over
    got = store.mail.wait("bob", 0)
    assert got is not None and got.mail.id == sent.id and _registrations(store) == []


class _Recording(_Steps):
    """The face's steps, noting what each Collect returned (a Handoff: the listener gave the
    mail, no take of our own)."""

    def __init__(self, store: ik.Store) -> None:
        super().__init__(store)
        self.collected: list[Any] = []

    def step(self, step: Any) -> Any:
        value = super().step(step)
        if isinstance(step, ops.Collect):
            self.collected.append(value)
        return value


def _wait_recording(store: ik.Store, timeout: float) -> tuple[ik.InboxItem | None, _Recording]:
    steps = _Recording(store)
    got = ops.run(store._pool.connection, mail.wait("bob", timeout), store._on_error, lambda: steps)
    return got, steps


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kathmandu"])
def test_the_listener_gives_the_mail_as_the_inbox_reads_it(
    ikigai_empty_db_url: str, zone: str
) -> None:
    """The mail a send's payload carries, given by the listener without a take, equals the
    inbox's row of it in every column: thread and parent, deadline, attachments, metadata,
    idempotency key, the timestamps (in the connections' time zone), read state."""
    url = make_conninfo(ikigai_empty_db_url, options=f"-c TimeZone={zone}")
    with ik.open(url) as store:
        store.identities.register("alice")
        store.identities.register("bob")
        first = store.mail.send("alice", ["bob"], "first", "one")
        got_first = store.mail.wait("bob", 0)
        assert got_first is not None and got_first.mail.id == first.id
        result: list[tuple[ik.InboxItem | None, _Recording]] = []
        waiter = threading.Thread(target=lambda: result.append(_wait_recording(store, 30)))
        waiter.start()
        _until(lambda: len(_registrations(store)) == 1, "the registration")
        sent = store.mail.send(
            "alice",
            ["bob", "alice"],
            "re: first",
            'b\u00e9\u2603 "quoted"\n\\',
            parent_id=first.id,
            priority="urgent",
            deadline_at=datetime(2031, 2, 3, 4, 5, 6, 789012, tzinfo=UTC),
            attachments=[{"name": "a.txt", "size": 3}],
            metadata={"n": 1.5, "big": 2**60, "list": [None, True, "x"]},
            idempotency_key="k-1",
        )
        waiter.join(timeout=30)
        got, steps = result[0]
        assert got is not None and got.mail.id == sent.id
        assert any(isinstance(c, Handoff) for c in steps.collected)  # given: no take
        (inboxed,) = [item for item in store.mail.inbox("bob") if item.mail.id == sent.id]
        assert inboxed == got
        assert got.mail.thread_id == first.thread_id and got.mail.parent_id == first.id
        assert got.read_at is not None and inboxed.read_at is not None
        assert got.read_at.tzinfo == inboxed.read_at.tzinfo  # the connections' zone, exactly
        _until(lambda: _registrations(store) == [], "the listener to delete the registration")


def test_closing_right_after_a_given_mail_deletes_its_registration(
    ikigai_empty_db_url: str,
) -> None:
    """A store closed as soon as its wait returned a given mail (a CLI's last call) deletes
    the registration first, on both faces: nothing is left for the reaper to make unread."""
    with ik.open(ikigai_empty_db_url) as other:
        other.identities.register("alice")
        other.identities.register("bob")
        for _ in range(3):
            opened = ik.open(ikigai_empty_db_url)
            got: list[ik.InboxItem | None] = []
            waiter = threading.Thread(
                target=lambda s=opened, out=got: out.append(s.mail.wait("bob", 30))
            )
            waiter.start()
            _until(lambda: len(_registrations(other)) == 1, "the registration")
            sent = other.mail.send("alice", ["bob"], "s", "b")
            waiter.join(timeout=30)
            opened.close()
            assert got[0] is not None and got[0].mail.id == sent.id
            assert _registrations(other) == [] and _state(other, sent.id) == "read"

        async def main() -> None:
            for _ in range(3):
                astore = await ik.open_async(ikigai_empty_db_url)
                task = asyncio.create_task(astore.mail.wait("bob", 30))
                while not await asyncio.to_thread(_registrations, other):
                    await asyncio.sleep(0.01)
                sent = await asyncio.to_thread(other.mail.send, "alice", ["bob"], "s", "b")
                item = await task
                await astore.close()
                assert item is not None and item.mail.id == sent.id
                assert _registrations(other) == [] and _state(other, sent.id) == "read"

        asyncio.run(main())


def test_a_mail_too_big_for_a_payload_is_taken_by_the_waiter(store: ik.Store) -> None:
    """A mail whose columns do not fit in a notification's payload (8000 bytes) is handed
    over all the same; the waiter takes it itself (its registration is deleted by its take)."""
    result: list[tuple[ik.InboxItem | None, _Recording]] = []
    waiter = threading.Thread(target=lambda: result.append(_wait_recording(store, 30)))
    waiter.start()
    _until(lambda: len(_registrations(store)) == 1, "the registration")
    sent = store.mail.send("alice", ["bob"], "big", "x" * 9000)
    assert _state(store, sent.id) == "read"
    waiter.join(timeout=30)
    got, steps = result[0]
    assert got is not None and got.mail.id == sent.id and got.mail.body == "x" * 9000
    assert not any(isinstance(c, Handoff) for c in steps.collected)
    assert _registrations(store) == []  # the waiter's own take deleted it
    assert store.mail.inbox("bob") == [got]


class _SendThen(_Steps):
    """The face's steps, except that the first Sleep sends a mail (handed to the sleeping
    waiter) and then ``then()`` (raise, or sleep past the deadline)."""

    def __init__(self, store: ik.Store, sender: ik.Store, then: Callable[[float], None]):
        super().__init__(store)
        self.sender, self.then = sender, then
        self.sent: list[int] = []

    def step(self, step: Any) -> Any:
        if isinstance(step, ops.Sleep) and not self.sent:
            self.sent.append(self.sender.mail.send("alice", ["bob"], "s", "b").id)
            self.then(step.seconds)
            return None
        return super().step(step)


def _drive(store: ik.Store, steps: _SendThen, timeout: float) -> ik.InboxItem | None:
    return ops.run(
        store._pool.connection, mail.wait("bob", timeout), store._on_error, lambda: steps
    )


@pytest.mark.parametrize("given", [False, True], ids=["handed", "given_and_deleted"])
def test_interrupted_after_a_hand_off_makes_the_mail_unread_again(
    store: ik.Store, ikigai_empty_db_url: str, given: bool
) -> None:
    """KeyboardInterrupt while asleep with a mail handed over: the registration goes and the
    mail is unread again; the next wait gets it. ``given``: the interrupt comes only after the
    listener gave the mail and deleted the registration (so the reaper can no longer undo
    it): the waiter gives it back."""

    def interrupt(_: float) -> None:
        if given:
            _until(lambda: _registrations(store) == [], "the listener to delete it")
        raise KeyboardInterrupt

    with ik.open(ikigai_empty_db_url) as sender:
        steps = _SendThen(store, sender, interrupt)
        with pytest.raises(KeyboardInterrupt):
            _drive(store, steps, 30)
    (sent,) = steps.sent
    assert _registrations(store) == [] and _state(store, sent) == "unread"
    assert store._listener._handed == {} and store._listener._expected == set()
    got = store.mail.wait("bob", 0)
    assert got is not None and got.mail.id == sent


def test_timed_out_after_a_hand_off_returns_the_mail(
    store: ik.Store, ikigai_empty_db_url: str
) -> None:
    """A mail handed over during the last sleep is returned, though the deadline passed."""
    with ik.open(ikigai_empty_db_url) as sender:
        steps = _SendThen(store, sender, lambda seconds: time.sleep(seconds))
        # Long enough that the wait reaches its first sleep before the deadline even on a
        # loaded machine (with 0.3 s it once timed out before sleeping: nothing was sent).
        got = _drive(store, steps, 2.0)
    (sent,) = steps.sent
    assert got is not None and got.mail.id == sent and got.state == "read"
    _until(lambda: _registrations(store) == [], "the listener to delete the registration")
    assert store.mail.counts("bob").unread == 0


def test_async_cancel_after_a_hand_off_makes_the_mail_unread_again(
    ikigai_empty_db_url: str,
) -> None:
    """asyncio: a waiter cancelled after a send handed it a mail (the event loop blocked by the
    send, so the waiter cannot take it first): the mail is unread again."""

    async def main() -> int:
        async with ik.open_async(ikigai_empty_db_url) as astore:
            for name in ("alice", "bob"):
                await astore.identities.register(name)
            task = asyncio.create_task(astore.mail.wait("bob", 30))
            with ik.open(ikigai_empty_db_url) as sync:
                while not _registrations(sync):
                    await asyncio.sleep(0.01)
                # The waiter may still be inside its register call: it withdraws it all the same.
                sent = sync.mail.send("alice", ["bob"], "s", "b").id  # blocks the loop
                assert _state(sync, sent) == "read"
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert _registrations(sync) == [] and _state(sync, sent) == "unread"
            got = await astore.mail.wait("bob", 0)
            assert got is not None and got.mail.id == sent
            return sent

    asyncio.run(main())


def test_async_sleep_cancelled_as_it_is_woken_is_cancelled(ikigai_empty_db_url: str) -> None:
    """The asyncio face's sleep, cancelled as its wake-up arrives (the race that made the test
    above flaky): it raises CancelledError at every interleaving, never returns as if woken
    (asyncio.wait_for on 3.11 swallowed the cancellation: the wait kept the hand-off)."""

    async def main() -> None:
        async with ik.open_async(ikigai_empty_db_url) as astore:
            steps = _AsyncSteps(astore)
            try:
                await steps.step(ops.Listen((mail.MAIL_CHANNEL, 1)))
                cancelled: list[int] = []
                for turns in range(6):
                    task = asyncio.create_task(steps.step(ops.Sleep(30)))
                    for _ in range(3):
                        await asyncio.sleep(0)
                    steps._listening.event.set()
                    for _ in range(turns):
                        await asyncio.sleep(0)
                    if task.cancel():  # False: it returned (woken) before the cancellation
                        cancelled.append(turns)
                        with pytest.raises(asyncio.CancelledError):
                            await task
                    steps._listening.event.clear()
                assert cancelled[:1] == [0]  # at least the cancel right after the wake-up
            finally:
                steps.close()

    asyncio.run(main())


class _CancelAfterExecute:
    """A connection whose cursors, once their statement has run (committed: the pool's
    connections autocommit), note how many registrations exist and cancel the current task
    before the result reaches the operation."""

    def __init__(self, store: ik.AsyncStore, conn: Any, committed: list[int]) -> None:
        self.store, self.conn, self.committed = store, conn, committed

    def cursor(self, **kwargs: Any) -> Any:
        return _CancelledCursor(self, self.conn.cursor(**kwargs))

    @property
    def pgconn(self) -> Any:  # the driver reads the transaction status (ops.execute)
        return self.conn.pgconn


class _CancelledCursor:
    """A cursor whose ``execute`` runs its statement, then cancels the current task."""

    def __init__(self, owner: _CancelAfterExecute, cur: Any) -> None:
        self.owner, self.cur = owner, cur

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        result = await self.cur.execute(*args, **kwargs)
        async with self.owner.store._pool.connection() as other:  # what is committed
            seen = await other.execute("SELECT count(*) AS n FROM mail_waiters")
            self.owner.committed.append(int((await seen.fetchone())["n"]))  # type: ignore[index]
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)  # cancelled here: committed, the id not yet received
        return result


@pytest.mark.parametrize("where", ["before", "inside", "after"])
def test_async_cancel_around_the_register_call_withdraws_it(
    ikigai_empty_db_url: str, where: str
) -> None:
    """asyncio: a waiter cancelled just before its register call, inside it (committed or not)
    or just after it (committed, its result not yet received) leaves no registration, so a
    later send is not handed to it; a new wait gets that mail."""

    async def main() -> None:
        async with ik.open_async(ikigai_empty_db_url) as astore:
            for name in ("alice", "bob"):
                await astore.identities.register(name)
            registering = False
            committed: list[int] = []

            class Steps(_AsyncSteps):
                async def step(self, step: Any) -> Any:
                    nonlocal registering
                    value = await super().step(step)
                    if not isinstance(step, ops.Expect):  # Liveness, Expect, then the call
                        registering = isinstance(step, ops.Liveness) and value is not None
                    return value

            @asynccontextmanager
            async def scope() -> AsyncIterator[Any]:
                nonlocal registering
                this, registering = registering, False  # the register call's scope, if set
                task = asyncio.current_task()
                assert task is not None
                if this and where == "before":
                    task.cancel()
                    await asyncio.sleep(0)  # cancelled here, before the statement is sent
                async with astore._pool.connection() as conn:
                    if this and where == "inside":
                        task.cancel()  # cancelled at the statement's first await
                    yield (
                        _CancelAfterExecute(astore, conn, committed)
                        if this and where == "after"
                        else conn
                    )

            waiter = asyncio.create_task(
                ops.arun(scope, mail.wait("bob", 30), astore._on_error, lambda: Steps(astore))
            )
            with pytest.raises(asyncio.CancelledError):
                await waiter
            with ik.open(ikigai_empty_db_url) as sync:
                assert _registrations(sync) == []
                sent = sync.mail.send("alice", ["bob"], "s", "b").id
                assert _state(sync, sent) == "unread"
            if where == "after":
                assert committed == [1]
            got = await astore.mail.wait("bob", 0)
            assert got is not None and got.mail.id == sent

    asyncio.run(main())


_CHILD = """
import sys
import ikigai_store as ik
with ik.open(sys.argv[1]) as store:
    print("waiting", flush=True)
    store.mail.wait("bob", 60)
"""


def _child(url: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, url], stdout=subprocess.DEVNULL, text=True, env=env
    )


def _kill(store: ik.Store, child: subprocess.Popen[str]) -> None:
    """SIGKILL the waiter process and wait until its listener connection has ended."""
    child.kill()
    child.wait(timeout=30)
    _until(
        lambda: not _q(store, "SELECT 1 FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'"),
        "the child's listener connection to end",
    )


def test_killed_waiter_before_a_hand_off(store: ik.Store, ikigai_empty_db_url: str) -> None:
    """A waiter process SIGKILLed while registered: its registration is dead, so a send leaves
    the mail unread, and a new wait gets it (and reaps the registration)."""
    child = _child(ikigai_empty_db_url)
    try:
        _until(lambda: len(_registrations(store)) == 1, "the child's registration")
    finally:
        _kill(store, child)
    sent = store.mail.send("alice", ["bob"], "s", "b")
    assert _state(store, sent.id) == "unread"
    got = store.mail.wait("bob", 5)
    assert got is not None and got.mail.id == sent.id and _registrations(store) == []


def test_killed_waiter_after_a_hand_off(store: ik.Store, ikigai_empty_db_url: str) -> None:
    """A waiter process stopped (SIGSTOP: its connections and lock stay) gets a hand-off, then
    is SIGKILLed before taking it: the mail becomes unread again and a new wait gets it."""
    child = _child(ikigai_empty_db_url)
    try:
        _until(lambda: len(_registrations(store)) == 1, "the child's registration")
        child.send_signal(signal.SIGSTOP)
        sent = store.mail.send("alice", ["bob"], "s", "b")
        assert _state(store, sent.id) == "read"
        assert [r["handed_mail_id"] for r in _registrations(store)] == [sent.id]
    finally:
        _kill(store, child)
    got = store.mail.wait("bob", 5)  # its start reaps the dead registration
    assert got is not None and got.mail.id == sent.id and _registrations(store) == []


def test_prune_reaps_dead_hand_offs(store: ik.Store) -> None:
    """mail.prune makes a mail handed to a dead registration (its key held by no one) unread."""
    sent = store.mail.send("alice", ["bob"], "s", "b")
    with store._connection() as conn:
        conn.execute(
            "UPDATE mail_recipients SET state = 'read', read_at = ikigai_now(),"
            " state_changed_at = ikigai_now() WHERE mail_id = %s",
            [sent.id],
        )
        conn.execute(
            "INSERT INTO mail_waiters (id, identity_id, liveness, expires_at, handed_mail_id,"
            " handed_at) SELECT 7, i.id, 42, ikigai_now() + interval '1 hour', r.mail_id,"
            " r.state_changed_at FROM identities AS i JOIN mail_recipients AS r"
            " ON r.identity_id = i.id WHERE i.name = 'bob'"
        )
    assert store.mail.counts("bob").unread == 0
    store.mail.prune()
    assert _registrations(store) == [] and _state(store, sent.id) == "unread"


def test_a_live_registration_is_kept_by_the_reaper(store: ik.Store) -> None:
    """A registration whose key is held (its listener alive) survives prune and wait starts."""
    with psycopg.connect(store._conninfo, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(4242)")
        with store._connection() as conn:
            conn.execute(
                "INSERT INTO mail_waiters (id, identity_id, liveness, expires_at)"
                " SELECT 7, id, 4242, ikigai_now() + interval '1 hour' FROM identities"
                " WHERE name = 'bob'"
            )
        store.mail.prune()
        assert store.mail.wait("bob", 0) is None
        assert len(_registrations(store)) == 1
        sent = store.mail.send("alice", ["bob"], "s", "b")  # handed to the live registration
        assert [r["handed_mail_id"] for r in _registrations(store)] == [sent.id]
        holder_pid = holder.info.backend_pid
    _wait_gone(store, holder_pid)  # its lock goes when its backend has exited, not at close()
    store.mail.prune()  # the holder is gone: reaped, unread again
    assert _registrations(store) == [] and _state(store, sent.id) == "unread"


def _wait_gone(store: ik.Store, pid: int) -> None:
    """Wait (at most 10 s) until the backend ``pid`` has exited, its session locks with it."""
    deadline = time.monotonic() + 10
    with store._connection() as conn:
        while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} did not exit"
            time.sleep(0.01)


def _collect(store: ik.Store, got: list[int], stop: threading.Event) -> None:
    while not stop.is_set():
        item = store.mail.wait("bob", 0.5)
        if item is not None:
            got.append(item.mail.id)


def test_two_waiters_and_many_sends_deliver_each_mail_once(
    store: ik.Store, ikigai_empty_db_url: str
) -> None:
    """Two waiters of one identity (two stores, two listeners) and 60 sends: every mail is
    returned exactly once, and none is left unread."""
    with ik.open(ikigai_empty_db_url) as other:
        got_a: list[int] = []
        got_b: list[int] = []
        stop = threading.Event()
        waiters = [
            threading.Thread(target=_collect, args=(store, got_a, stop)),
            threading.Thread(target=_collect, args=(other, got_b, stop)),
        ]
        for w in waiters:
            w.start()
        with ik.open(ikigai_empty_db_url) as sender:
            sent = []
            for n in range(60):
                sent.append(sender.mail.send("alice", ["bob"], "s", str(n)).id)
                if n % 3 == 0:
                    time.sleep(0.01)
        _until(lambda: len(got_a) + len(got_b) >= len(sent), "every mail to be returned")
        stop.set()
        for w in waiters:
            w.join(timeout=30)
    assert sorted(got_a + got_b) == sorted(sent)
    assert store.mail.counts("bob").unread == 0 and _registrations(store) == []


def test_sends_racing_timeouts_lose_nothing(store: ik.Store, ikigai_empty_db_url: str) -> None:
    """Short waits timing out while sends arrive: every mail is either returned by one wait
    or still unread, never both, never neither."""
    returned: list[int] = []
    stop = threading.Event()

    def waiter() -> None:
        while not stop.is_set():
            item = store.mail.wait("bob", 0.02)
            if item is not None:
                returned.append(item.mail.id)

    thread = threading.Thread(target=waiter)
    thread.start()
    with ik.open(ikigai_empty_db_url) as sender:
        sent = []
        for n in range(80):
            sent.append(sender.mail.send("alice", ["bob"], "s", str(n)).id)
            time.sleep(0.003 * (n % 7))
    stop.set()
    thread.join(timeout=30)
    unread = [i.mail.id for i in store.mail.inbox("bob", state="unread", limit=1000)]
    assert len(returned) == len(set(returned))
    assert sorted(returned + unread) == sorted(sent)
    assert _registrations(store) == []
