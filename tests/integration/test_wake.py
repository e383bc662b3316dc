"""Wake-ups after the commit (migration 0032): the library's waking writes notify after their
commit, a caller's transaction still notifies at its commit, a rolled-back write never
notifies, raw SQL writers notify as before, and a lost wake-up costs a waiter only latency."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

import ikigai_store as ik
from ikigai_store import notify

pytestmark = pytest.mark.db

CHANNELS = ("ikigai_mail", "ikigai_queue", "ikigai_session", "ikigai_task")


@pytest.fixture
def store(ikigai_db_url: str) -> Iterator[ik.Store]:
    """A store on this file's database whose writes commit (one pooled connection)."""
    with ik.open(ikigai_db_url, pool_size=1) as opened:
        yield opened


@pytest.fixture
def listener(ikigai_db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A plain connection listening on the channels the library's writes notify."""
    with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
        for channel in CHANNELS:
            conn.execute(f"LISTEN {channel}")
        yield conn


def _heard(conn: psycopg.Connection[Any], seconds: float) -> set[tuple[str, str]]:
    """The notifications ``conn`` receives within ``seconds``."""
    return {(n.channel, n.payload) for n in conn.notifies(timeout=seconds)}


def _hear(conn: psycopg.Connection[Any], wanted: tuple[str, str]) -> None:
    """Wait (a bound against hangs, not a timing assertion) until ``wanted`` is heard."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for note in conn.notifies(timeout=0.5, stop_after=1):
            if (note.channel, note.payload) == wanted:
                return
    raise AssertionError(f"never heard {wanted}")


def _identity(store: ik.Store, name: str) -> int:
    return store.identities.register(name).id


def _pending(store: ik.Store) -> tuple[str | None, str | None]:
    """The pooled connection's (ikigai.wake_after_commit, ikigai.wakes)."""
    with store._pool.connection() as conn:
        row = conn.execute(
            "SELECT current_setting('ikigai.wake_after_commit', true) AS flag, "
            "current_setting('ikigai.wakes', true) AS wakes"
        ).fetchone()
    assert row is not None
    return row["flag"], row["wakes"] or ""


def test_library_writes_wake_after_their_commit(
    store: ik.Store, listener: psycopg.Connection[Any]
) -> None:
    """An append to a listened session, a send and a publish to a listened queue wake their
    listeners, from a connection that keeps its notifications for after the commit and leaves
    none unsent."""
    bob = _identity(store, "w1-bob")
    _identity(store, "w1-alice")
    session = store.create_session("w1")
    with store._connection() as conn:
        conn.execute(
            "UPDATE sessions SET listened_until = now() + interval '1 hour' WHERE id = %s",
            (session,),
        )
    store.append(session, "user", "hello")
    _hear(listener, ("ikigai_session", str(session)))
    assert _pending(store) == ("on", "")
    store.mail.send("w1-alice", "w1-bob", "hi", "body")
    _hear(listener, ("ikigai_mail", str(bob)))
    assert _pending(store) == ("on", "")
    topic = store.topics.create("w1-jobs", "queue")
    store.topics.subscribe("w1-bob", "w1-jobs")
    # What a blocking claim does (migration 0050).
    assert store._run(notify.listen_topics([topic.id], timedelta(hours=1))) == 1
    store.mail.publish("w1-alice", "w1-jobs", "job", "body")
    _hear(listener, ("ikigai_queue", str(topic.id)))
    assert _pending(store) == ("on", "")


def test_atomic_operation_wakes_after_its_commit(
    store: ik.Store, listener: psycopg.Connection[Any]
) -> None:
    """A reply (an atomic operation: its own transaction) wakes the recipient after it commits."""
    alice = _identity(store, "w2-alice")
    _identity(store, "w2-bob")
    sent = store.mail.send("w2-alice", "w2-bob", "question", "?")
    _heard(listener, 0.2)
    store.mail.reply("w2-bob", sent.id, "answer")
    _hear(listener, ("ikigai_mail", str(alice)))
    assert _pending(store) == ("on", "")


def test_sql_keeps_wakes_until_sent(ikigai_db_url: str, listener: psycopg.Connection[Any]) -> None:
    """With ikigai.wake_after_commit on, ikigai_notify sends nothing at the commit: the wake-up
    waits for ikigai_send_wakes, once; a rolled-back transaction or savepoint keeps none."""
    with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
        conn.execute("SET ikigai.wake_after_commit = on")
        conn.execute("SELECT ikigai_notify('ikigai_mail', '-7')")
        conn.execute("SELECT ikigai_notify('ikigai_mail', '-7')")  # kept once
        with pytest.raises(psycopg.errors.DivisionByZero), conn.transaction():
            conn.execute("SELECT ikigai_notify('ikigai_mail', '-8')")
            conn.execute("SELECT 1/0")
        with conn.transaction():
            with pytest.raises(psycopg.errors.DivisionByZero), conn.transaction():
                conn.execute("SELECT ikigai_notify('ikigai_mail', '-9')")
                conn.execute("SELECT 1/0")
            conn.execute("SELECT ikigai_notify_ids('ikigai_task', '-10,-11')")
        assert _heard(listener, 0.3) == set()
        assert conn.execute("SELECT ikigai_send_wakes()").fetchone() == (2,)
        assert _heard(listener, 1.0) == {("ikigai_mail", "-7"), ("ikigai_task", "-10,-11")}
        assert conn.execute("SELECT ikigai_send_wakes()").fetchone() == (0,)


def test_raw_sql_writer_wakes_listeners(
    store: ik.Store, ikigai_db_url: str, listener: psycopg.Connection[Any]
) -> None:
    """A writer that does not go through the library (no setting) still notifies in its own
    transaction: marking a mail unread again wakes the recipient with no send_wakes."""
    bob = _identity(store, "w3-bob")
    _identity(store, "w3-alice")
    sent = store.mail.send("w3-alice", "w3-bob", "hi", "body")
    assert store.mail.read("w3-bob", sent.id) is not None
    _heard(listener, 0.2)
    with psycopg.connect(ikigai_db_url, autocommit=True) as raw:
        raw.execute(
            "UPDATE mail_recipients SET state = 'unread' WHERE mail_id = %s AND identity_id = %s",
            (sent.id, bob),
        )
    _hear(listener, ("ikigai_mail", str(bob)))


def test_rolled_back_write_sends_no_wake(
    store: ik.Store, listener: psycopg.Connection[Any]
) -> None:
    """A send rolled back with the caller's transaction, or with a savepoint, wakes nobody;
    the rest of the transaction wakes its recipient at the commit."""
    bob = _identity(store, "w4-bob")
    carol = _identity(store, "w4-carol")
    _identity(store, "w4-alice")
    with pytest.raises(RuntimeError), store.transaction():
        store.mail.send("w4-alice", "w4-bob", "never", "body")
        raise RuntimeError("roll back")
    with store.transaction():
        with pytest.raises(RuntimeError), store.transaction():
            store.mail.send("w4-alice", "w4-carol", "never", "body")
            raise RuntimeError("roll back the savepoint")
        store.mail.send("w4-alice", "w4-bob", "kept", "body")
    heard = _heard(listener, 1.0)
    assert ("ikigai_mail", str(bob)) in heard
    assert ("ikigai_mail", str(carol)) not in heard
    assert [m.mail.subject for m in store.mail.inbox("w4-bob")] == ["kept"]
    assert _pending(store) == ("on", "")


def test_caller_transaction_notifies_at_its_commit(
    store: ik.Store, listener: psycopg.Connection[Any]
) -> None:
    """A send inside store.transaction() wakes nobody before the transaction commits, and its
    recipient at the commit."""
    bob = _identity(store, "w5-bob")
    _identity(store, "w5-alice")
    with store.transaction():
        store.mail.send("w5-alice", "w5-bob", "grouped", "body")
        assert _heard(listener, 0.3) == set()
    _hear(listener, ("ikigai_mail", str(bob)))
    assert _pending(store) == ("on", "")


def test_lost_wake_costs_a_waiter_only_latency(
    store: ik.Store, ikigai_db_url: str, listener: psycopg.Connection[Any]
) -> None:
    """A writer that dies between its commit and its wake-ups leaves its mail stored: a
    waiting mail.wait and a blocking claim find it when they look again at their deadline."""
    bob = _identity(store, "w6-bob")
    _identity(store, "w6-alice")
    topic = store.topics.create("w6-jobs", "queue")
    store.topics.subscribe("w6-bob", "w6-jobs")
    results: dict[str, Any] = {}
    with ik.open(ikigai_db_url, pool_size=2) as waiter:

        def wait() -> None:
            results["mail"] = waiter.mail.wait("w6-bob", 1.5)

        def claim() -> None:
            results["claim"] = waiter.topics.claim("w6-bob", "w6-jobs", wait=1.5)

        threads = [threading.Thread(target=wait), threading.Thread(target=claim)]
        for thread in threads:
            thread.start()
        time.sleep(0.3)  # both are waiting (if not, they find the mail at once: same result)
        # The dying writer: its connection keeps its wake-ups for after the commit, commits,
        # and is gone before sending them.
        with psycopg.connect(ikigai_db_url, autocommit=True) as dying:
            dying.execute("SET ikigai.wake_after_commit = on")
            dying.execute(ik.queries.publish_mail.sql, _publish_params("w6-alice", "w6-jobs"))
            dying.execute(ik.queries.send_mail.sql, _send_params("w6-alice", ["w6-bob"]))
            kept = dying.execute("SELECT current_setting('ikigai.wakes')").fetchone()
            assert kept is not None and kept[0]  # kept for a send_wakes that never comes
        for thread in threads:
            thread.join(timeout=30)
    assert ("ikigai_mail", str(bob)) not in _heard(listener, 0.2)
    assert results["mail"] is not None and results["mail"].mail.subject == "lost wake-up"
    assert results["claim"] is not None and results["claim"].mail.topic == topic.name


def _send_params(sender: str, recipients: list[str]) -> dict[str, Any]:
    """send_mail's parameters for a new thread (what mail.send passes)."""
    return {
        "sender": sender,
        "recipients": recipients,
        "thread_id": None,
        "new_thread_id": str(uuid.uuid4()),
        "parent_id": None,
        "subject": "lost wake-up",
        "body": "body",
        "priority": "normal",
        "deadline_at": None,
        "attachments": None,
        "metadata": None,
        "idempotency_key": None,
        "request_hash": None,
    }


def _publish_params(sender: str, topic: str) -> dict[str, Any]:
    """publish_mail's parameters (what mail.publish passes)."""
    return {
        "sender": sender,
        "topic": topic,
        "subject": "job",
        "body": "body",
        "priority": "normal",
        "attachments": None,
        "metadata": None,
        "idempotency_key": None,
        "request_hash": None,
        "new_thread_id": str(uuid.uuid4()),
        "delay": None,
    }


def test_wake_failure_after_the_commit_is_not_an_error(
    store: ik.Store, ikigai_db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """When the wake-up statement fails after a write committed, the write is still
    acknowledged (returned, stored) and the failure logged."""
    _identity(store, "w7-bob")
    _identity(store, "w7-alice")
    with psycopg.connect(ikigai_db_url, autocommit=True) as admin:
        admin.execute("ALTER FUNCTION ikigai_send_wakes() RENAME TO ikigai_send_wakes_away")
        try:
            with caplog.at_level(logging.WARNING, logger="ikigai_store.ops"):
                sent = store.mail.send("w7-alice", "w7-bob", "kept", "body")
        finally:
            admin.execute("ALTER FUNCTION ikigai_send_wakes_away() RENAME TO ikigai_send_wakes")
    assert [m.mail.id for m in store.mail.inbox("w7-bob")] == [sent.id]
    assert "wake-ups were not sent" in caplog.text


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_write_whose_commit_fails_is_an_error_not_an_acknowledgement(
    ikigai_db_url: str, face: str
) -> None:
    """A pipelined write's rows reach the client before its commit: when the COMMIT itself
    fails (here a deferred constraint trigger), send, publish and publish_many raise, and
    nothing is stored. (A server dying during the commit: ``ConnectionLost``, the connection
    being broken.)"""
    doomed = f"doomed-{uuid.uuid4().hex[:8]}"
    names = (f"w11{face}-alice", f"w11{face}-bob")
    topic = f"w11{face}-jobs"

    async def on_async() -> None:
        async with await ik.AsyncStore.connect(ikigai_db_url, pool_size=1) as store:
            await store.identities.register(names[0])
            await store.identities.register(names[1])
            await store.topics.create(topic, "queue")
            with pytest.raises(ik.DatabaseError, match="refused at commit"):
                await store.mail.send(names[0], names[1], doomed, "body")
            with pytest.raises(ik.DatabaseError, match="refused at commit"):
                await store.mail.publish(names[0], topic, doomed, "body")
            with pytest.raises(ik.DatabaseError, match="refused at commit"):
                await store.mail.publish_many(names[0], topic, ["a", "b"], subject=doomed)
            assert (await store.mail.send(names[0], names[1], "kept", "body")).id > 0

    with psycopg.connect(ikigai_db_url, autocommit=True) as admin:
        admin.execute(
            f"""CREATE FUNCTION w11_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.subject = '{doomed}' THEN RAISE 'refused at commit'; END IF;
            RETURN NULL; END $$;
            CREATE CONSTRAINT TRIGGER w11_refuse AFTER INSERT ON mail
            DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION w11_refuse()"""
        )
        try:
            if face == "async":
                asyncio.run(on_async())
            else:
                with ik.open(ikigai_db_url, pool_size=1) as store:
                    store.identities.register(names[0])
                    store.identities.register(names[1])
                    store.topics.create(topic, "queue")
                    with pytest.raises(ik.DatabaseError, match="refused at commit"):
                        store.mail.send(names[0], names[1], doomed, "body")
                    with pytest.raises(ik.DatabaseError, match="refused at commit"):
                        store.mail.publish(names[0], topic, doomed, "body")
                    with pytest.raises(ik.DatabaseError, match="refused at commit"):
                        store.mail.publish_many(names[0], topic, ["a", "b"], subject=doomed)
                    assert store.mail.send(names[0], names[1], "kept", "body").id > 0
        finally:
            admin.execute("DROP TRIGGER w11_refuse ON mail; DROP FUNCTION w11_refuse()")
        stored = admin.execute("SELECT count(*) FROM mail WHERE subject = %s", (doomed,))
        assert stored.fetchone() == (0,)


def test_failed_write_is_an_error_and_sends_nothing(
    store: ik.Store, listener: psycopg.Connection[Any]
) -> None:
    """A waking write that fails raises its error as before and wakes nobody."""
    _identity(store, "w8-alice")
    with pytest.raises(ik.NotFound):
        store.mail.send("w8-alice", "w8-nobody", "lost", "body")
    assert not {h for h in _heard(listener, 0.3) if h[0] == "ikigai_mail"}
    assert _pending(store) == ("on", "")


def test_async_face_wakes_after_commit_and_at_the_callers_commit(
    ikigai_db_url: str, listener: psycopg.Connection[Any]
) -> None:
    """AsyncStore: a send wakes after its commit; inside transaction() at the commit, and a
    rolled-back one never."""

    async def main() -> tuple[int, int]:
        async with await ik.AsyncStore.connect(ikigai_db_url, pool_size=1) as store:
            bob = (await store.identities.register("w9-bob")).id
            carol = (await store.identities.register("w9-carol")).id
            await store.identities.register("w9-alice")
            await store.mail.send("w9-alice", "w9-bob", "direct", "body")
            with pytest.raises(RuntimeError):
                async with store.transaction():
                    await store.mail.send("w9-alice", "w9-carol", "never", "body")
                    raise RuntimeError("roll back")
            async with store.transaction():
                await store.mail.send("w9-alice", "w9-bob", "grouped", "body")
            return bob, carol

    bob, carol = asyncio.run(main())
    heard = _heard(listener, 1.0)
    assert ("ikigai_mail", str(bob)) in heard
    assert ("ikigai_mail", str(carol)) not in heard


def test_wakes_are_sent_when_notices_were_silenced(
    ikigai_db_url: str, listener: psycopg.Connection[Any]
) -> None:
    """A store whose connections start with client_min_messages = warning (notices silenced)
    lowers it on its own connections: an append to a listened session still wakes."""
    url = make_conninfo(ikigai_db_url, options="-c client_min_messages=warning")
    with ik.open(url, pool_size=1) as store:
        session = store.create_session("w10")
        with psycopg.connect(ikigai_db_url, autocommit=True) as raw:
            raw.execute(
                "UPDATE sessions SET listened_until = now() + interval '1 hour' WHERE id = %s",
                (session,),
            )
        store.append(session, "user", "hello")
        _hear(listener, ("ikigai_session", str(session)))
        assert _pending(store) == ("on", "")


def test_every_task_write_wakes_its_list_and_a_refused_one_nothing(
    store: ik.Store, listener: psycopg.Connection[Any]
) -> None:
    """Each task write (upsert, claim, release, completion, sync, prune) wakes ikigai_task with
    its list's row id: on Citus the task functions send it (migration 0036: tasks' triggers
    are gone there); a refused claim sends nothing."""
    owner = f"tasker-{uuid.uuid4().hex[:8]}"
    store.identities.register(owner)
    board = store.tasks.create_list(f"wake-{uuid.uuid4().hex[:8]}", owner)
    wanted = ("ikigai_task", str(board.id))
    name = board.list_id
    steps: list[Any] = [
        lambda: store.tasks.upsert(name, "a", subject="first"),
        lambda: store.tasks.upsert(name, "b", subject="second", blocked_by=["a"]),
        lambda: store.tasks.claim(name, "a", owner),
        lambda: store.tasks.release(name, "a", owner),
        lambda: store.tasks.claim(name, "a", owner),
        lambda: store.tasks.complete(name, "a", owner),
    ]
    for step in steps:
        step()
        _hear(listener, wanted)
    with pytest.raises(ik.InvalidArgument, match="completed"):
        store.tasks.claim(name, "a", owner)
    assert not {n for n in _heard(listener, 0.5) if n[0] == "ikigai_task"}
    for step in (
        lambda: store.tasks.sync(name, ["a"]),
        lambda: store.tasks.prune(older_than=0),
    ):
        step()
        _hear(listener, wanted)
