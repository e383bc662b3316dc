"""The offline outbox: checked queueing, FIFO delivery with the original keys, refusals, expiry,
stale claims, outages (a database that stops taking connections), and a drainer killed with
SIGKILL mid-drain: exactly one mail per key.

Outages are real: ``ALTER DATABASE ... ALLOW_CONNECTIONS false`` and terminating its backends
make every call of a store on that database fail with ``ConnectionLost`` / ``ConnectError``
(committed databases, one per test, so nothing else is disturbed).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import signal
import sqlite3
import stat
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql

import ikigai_store as ik

pytestmark = pytest.mark.db

SEND = {"sender": "ann", "to": ["bob"], "subject": "s", "body": "b"}


@pytest.fixture
def outbox(tmp_path: Path) -> ik.Outbox:
    return ik.Outbox(tmp_path / "state" / "outbox.sqlite3")


@pytest.fixture
def url(ikigai_empty_db_url: str) -> Iterator[str]:
    """A fresh migrated database holding identities ann and bob, committed."""
    with ik.open(ikigai_empty_db_url) as store:
        store.identities.register("ann")
        store.identities.register("bob")
    yield ikigai_empty_db_url


@pytest.fixture
def store(url: str) -> Iterator[ik.Store]:
    with ik.open(url, migrate=False, timeout=2.0) as store:
        yield store


@contextlib.contextmanager
def outage(server_url: str, url: str) -> Iterator[None]:
    """The database of ``url`` refuses connections and loses the ones it had, until the end."""
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(
            pgsql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(pgsql.Identifier(name))
        )
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name]
        )
        try:
            yield
        finally:
            admin.execute(
                pgsql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(pgsql.Identifier(name))
            )


def mails_by_key(store: ik.Store) -> dict[str, int]:
    """How many mails each idempotency key has."""
    with store._connection() as conn:
        rows = conn.execute(
            "SELECT idempotency_key AS k, count(*) AS n FROM mail GROUP BY 1"
        ).fetchall()
    return {r["k"]: r["n"] for r in rows}


# ---------------------------------------------------------------------- queueing (no database)


def test_enqueue_writes_a_private_file_with_a_uuid7_key(tmp_path: Path) -> None:
    """Until something is queued there is no file (and the outbox reads as empty); then its
    directory is 0700 and the file 0600; keys are UUIDv7 and the operation is listed, pending,
    with its payload as given."""
    outbox = ik.Outbox(tmp_path / "new" / "dir" / "o.sqlite3")
    assert outbox.list() == [] and outbox.clear() == 0 and sum(outbox.stats().values()) == 0
    assert not (tmp_path / "new").exists()
    key = outbox.enqueue("send", SEND)
    assert uuid.UUID(key).version == 7
    assert stat.S_IMODE(os.stat(outbox.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(outbox.path.parent).st_mode) == 0o700
    [op] = outbox.list()
    assert (op.idempotency_key, op.operation, op.sender, op.status) == (
        key,
        "send",
        "ann",
        "pending",
    )
    assert op.payload == SEND
    assert (op.attempts, op.last_error, op.mail_id) == (0, None, None)
    assert op.expires_at - op.created_at == timedelta(days=7)
    assert outbox.get(key) == op
    assert outbox.stats() == {
        "pending": 1,
        "delivering": 0,
        "delivered": 0,
        "failed": 0,
        "expired": 0,
    }


def test_keys_sort_by_creation_time(outbox: ik.Outbox) -> None:
    keys = [outbox.enqueue("heartbeat", {"name": "ann"}) for _ in range(3)]
    time.sleep(0.002)
    later = outbox.enqueue("heartbeat", {"name": "ann"})
    assert max(keys) < later


def test_objects_and_datetimes_in_payloads_are_stored_as_text(outbox: ik.Outbox) -> None:
    ann = ik.Identity.__new__(ik.Identity)
    object.__setattr__(ann, "name", "ann")
    deadline = datetime.fromisoformat("2031-02-03T04:05:06+01:00")
    key = outbox.enqueue(
        "send", {**SEND, "sender": ann, "to": [ann, "bob"], "deadline_at": deadline}
    )
    op = outbox.get(key)
    assert op.payload["sender"] == "ann" and op.payload["to"] == ["ann", "bob"]
    assert datetime.fromisoformat(op.payload["deadline_at"]) == deadline


BAD = [
    ("sendx", SEND, "operation must be one of"),
    ("send", ["sender"], "payload must be a mapping"),
    ("send", {**SEND, "colour": "red"}, "unexpected keyword argument 'colour'"),
    ("send", {"sender": "ann", "to": ["bob"], "subject": "s"}, "missing a required argument"),
    ("send", {**SEND, "priority": "high"}, "priority"),
    ("send", {**SEND, "to": []}, "to"),
    ("send", {**SEND, "deadline_at": datetime(2031, 1, 1)}, "deadline_at"),
    ("send", {**SEND, "metadata": {"x": math.nan}}, "metadata"),
    ("send", {**SEND, "metadata": {1, 2}}, "metadata"),
    ("send", {**SEND, "body": "a\x00b"}, "body"),
    ("send", {**SEND, "idempotency_key": "x" * 201}, "idempotency_key"),
    ("reply", {"sender": "ann", "mail_id": 0, "body": "b"}, "mail_id"),
    ("publish", {"sender": "ann", "topic": "", "subject": "s", "body": "b"}, "topic"),
    ("heartbeat", {"name": "-bad"}, "name"),
    ("heartbeat", {"name": "ann", "idempotency_key": "k"}, "idempotency_key"),
]


@pytest.mark.parametrize(("operation", "payload", "message"), BAD)
def test_bad_operations_are_refused_and_write_nothing(
    outbox: ik.Outbox, operation: str, payload: Any, message: str
) -> None:
    with pytest.raises(ik.InvalidArgument, match=message):
        outbox.enqueue(operation, payload)
    assert outbox.list(include_finished=True) == []


def test_differing_keys_in_payload_and_argument_are_refused(outbox: ik.Outbox) -> None:
    with pytest.raises(ik.InvalidArgument, match="differs"):
        outbox.enqueue("send", {**SEND, "idempotency_key": "a"}, idempotency_key="b")
    assert outbox.enqueue("send", {**SEND, "idempotency_key": "a"}) == "a"


def test_the_same_key_again_is_one_operation_unless_it_differs(outbox: ik.Outbox) -> None:
    assert outbox.enqueue("send", SEND, idempotency_key="k") == "k"
    assert outbox.enqueue("send", dict(SEND), idempotency_key="k") == "k"
    assert len(outbox.list()) == 1
    with pytest.raises(ik.Conflict, match="already queued"):
        outbox.enqueue("send", {**SEND, "body": "other"}, idempotency_key="k")
    assert [op.payload for op in outbox.list()] == [SEND]


def test_a_full_outbox_refuses_more(tmp_path: Path) -> None:
    outbox = ik.Outbox(tmp_path / "o.sqlite3", max_pending=3)
    for n in range(3):
        outbox.enqueue("send", SEND, idempotency_key=f"k{n}")
    with pytest.raises(ik.OutboxFull, match="max_pending"):
        outbox.enqueue("send", SEND, idempotency_key="k3")
    assert isinstance(ik.OutboxFull("x"), ik.IkigaiStoreError)
    assert outbox.enqueue("send", SEND, idempotency_key="k1") == "k1"  # already queued: fine
    assert len(outbox.list()) == 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_pending": 0},
        {"max_pending": True},
        {"ttl": timedelta(0)},
        {"ttl": "5"},
        {"stale_after": timedelta(seconds=-1)},
        {"path": 3},
    ],
)
def test_bad_outbox_options_are_refused(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ik.InvalidArgument):
        ik.Outbox(**{"path": tmp_path / "o.sqlite3", **kwargs})


def test_unusable_files_are_outbox_errors(tmp_path: Path) -> None:
    """A file of another layout version, or one that is not SQLite, is a clear OutboxError."""
    newer = tmp_path / "newer.sqlite3"
    with contextlib.closing(sqlite3.connect(newer)) as conn:
        conn.execute("PRAGMA user_version = 9")
    with pytest.raises(ik.OutboxError, match="layout 9"):
        ik.Outbox(newer)
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ik.OutboxError, match=r"junk\.sqlite3"):
        ik.Outbox(junk)


def test_the_status_check_holds_in_the_file(outbox: ik.Outbox) -> None:
    """pending_operations has CHECKs: a status outside the five is refused by SQLite itself."""
    key = outbox.enqueue("send", SEND)
    with (
        contextlib.closing(sqlite3.connect(outbox.path)) as conn,
        pytest.raises(sqlite3.IntegrityError),
    ):
        conn.execute(
            "UPDATE pending_operations SET status = 'lost' WHERE idempotency_key = ?", [key]
        )


def test_clear_forgets_finished_operations_or_everything(outbox: ik.Outbox) -> None:
    outbox.enqueue("send", SEND, idempotency_key="a")
    with contextlib.closing(sqlite3.connect(outbox.path)) as conn:
        conn.execute("UPDATE pending_operations SET status = 'failed'")
        conn.commit()
    outbox.enqueue("send", SEND, idempotency_key="b")
    assert outbox.clear() == 1
    assert [op.idempotency_key for op in outbox.list(include_finished=True)] == ["b"]
    assert outbox.clear(everything=True) == 1
    assert outbox.list(include_finished=True) == []
    with pytest.raises(ik.NotFound):
        outbox.get("b")


def test_the_default_path_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("IKIGAI_OUTBOX", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert ik.Outbox().path == tmp_path / "state" / "ikigai_store" / "outbox.sqlite3"
    monkeypatch.setenv("IKIGAI_OUTBOX", str(tmp_path / "mine.db"))
    assert ik.Outbox().path == tmp_path / "mine.db"


# ---------------------------------------------------------------------- draining


def test_drain_delivers_in_order_with_the_original_keys(outbox: ik.Outbox, store: ik.Store) -> None:
    """Every kind of operation is delivered, oldest first, each with its key; a second drain
    has nothing to do."""
    first = store.mail.send("bob", ["ann"], "hello", "hi")
    store.topics.create("feed")
    keys = [
        outbox.enqueue("send", SEND),
        outbox.enqueue("reply", {"sender": "ann", "mail_id": first.id, "body": "re"}),
        outbox.enqueue("publish", {"sender": "ann", "topic": "feed", "subject": "p", "body": "x"}),
        outbox.enqueue("heartbeat", {"name": "bob"}),
    ]
    assert outbox.drain(store) == ik.DrainReport(delivered=4, failed=0, expired=0, pending=0)
    ops = {op.idempotency_key: op for op in outbox.list(include_finished=True)}
    assert [ops[k].status for k in keys] == ["delivered"] * 4
    assert [ops[k].attempts for k in keys] == [1] * 4
    mail_ids = [ops[k].mail_id for k in keys[:3]]
    assert mail_ids == sorted(mail_ids) and ops[keys[3]].mail_id is None
    sent = {m.id: m for m in store.mail.sent("ann")}
    assert [sent[i].idempotency_key for i in mail_ids] == keys[:3]
    assert sent[mail_ids[1]].parent_id == first.id
    assert sent[mail_ids[2]].topic == "feed" and sent[mail_ids[2]].log_offset == 1
    assert outbox.drain(store) == ik.DrainReport()
    assert outbox.list() == []


def test_refused_operations_fail_and_are_not_retried(outbox: ik.Outbox, store: ik.Store) -> None:
    """A send to an unknown identity is refused by the store: failed, with the reason; the
    operations after it are still delivered; the next drain leaves it alone."""
    bad = outbox.enqueue("send", {**SEND, "to": ["nobody"]})
    reused = outbox.enqueue("send", SEND, idempotency_key="used")
    good = outbox.enqueue("send", SEND)
    store.mail.send("ann", ["bob"], "other", "request", idempotency_key="used")
    assert outbox.drain(store) == ik.DrainReport(delivered=1, failed=2)
    assert outbox.get(bad).status == "failed"
    assert "nobody" in (outbox.get(bad).last_error or "")
    assert outbox.get(reused).status == "failed"
    assert "Conflict" in (outbox.get(reused).last_error or "")
    assert outbox.get(good).status == "delivered"
    assert outbox.drain(store) == ik.DrainReport()
    assert outbox.get(bad).attempts == 1


def test_a_mail_delivered_before_a_crash_is_not_sent_twice(
    outbox: ik.Outbox, store: ik.Store
) -> None:
    """A drainer that delivered an operation and died before recording it leaves it
    'delivering'; once stale it is redelivered and the server returns the original mail."""
    key = outbox.enqueue("send", SEND)
    assert outbox._claim("dead-drainer") is not None  # what the killed drainer had done
    original = store.mail.send(**SEND, idempotency_key=key)  # ... and its delivery committed
    assert outbox.drain(store) == ik.DrainReport(pending=1)  # not stale yet: left alone
    later = ik.Outbox(outbox.path, stale_after=timedelta(milliseconds=1))
    time.sleep(0.01)
    assert later.drain(store) == ik.DrainReport(delivered=1)
    op = later.get(key)
    assert (op.status, op.mail_id, op.attempts) == ("delivered", original.id, 2)
    assert mails_by_key(store)[key] == 1


def test_operations_expire_undelivered(tmp_path: Path, store: ik.Store) -> None:
    outbox = ik.Outbox(tmp_path / "o.sqlite3", ttl=timedelta(milliseconds=50))
    key = outbox.enqueue("send", SEND)
    time.sleep(0.1)
    assert outbox.drain(store) == ik.DrainReport(expired=1)
    assert outbox.get(key).status == "expired"
    assert mails_by_key(store).get(key) is None
    time.sleep(0.1)
    outbox.drain(store)  # finished rows older than ttl are forgotten
    assert outbox.list(include_finished=True) == []


# ---------------------------------------------------------------------- outages


def test_send_or_queue_queues_while_offline_and_drain_delivers_after(
    outbox: ik.Outbox, store: ik.Store, url: str, ikigai_server_url: str
) -> None:
    """Offline, send_or_queue returns Queued (nothing lost, nothing raised); a drain while still
    offline keeps the operations pending (attempts + 1, last_error), stopping at the first;
    back online, they are delivered in order, and a send made then follows them."""
    assert isinstance(store.mail.send_or_queue(outbox, "ann", "bob", "on", "line"), ik.Mail)
    with outage(ikigai_server_url, url):
        queued = [store.mail.send_or_queue(outbox, "ann", ["bob"], f"s{n}", "b") for n in range(3)]
        assert all(isinstance(q, ik.Queued) for q in queued)
        report = outbox.drain(store)
        assert report == ik.DrainReport(pending=3)
        first, *rest = outbox.list()
        # Each later send_or_queue tried to drain the waiting ones first, then this drain.
        assert first.attempts == 3 and "Connect" in (first.last_error or "")
        assert [op.attempts for op in rest] == [0, 0]
    after = store.mail.send_or_queue(outbox, "ann", ["bob"], "s3", "b")
    assert isinstance(after, ik.Mail)
    subjects = [m.subject for m in reversed(store.mail.sent("ann"))]
    assert subjects == ["on", "s0", "s1", "s2", "s3"]
    keys = mails_by_key(store)
    assert all(keys[q.idempotency_key] == 1 for q in queued if isinstance(q, ik.Queued))


def test_send_or_queue_on_the_async_face(tmp_path: Path, url: str, ikigai_server_url: str) -> None:
    import asyncio

    outbox = ik.Outbox(tmp_path / "o.sqlite3")

    async def main() -> None:
        async with await ik.AsyncStore.connect(url, timeout=2.0) as astore:
            with outage(ikigai_server_url, url):
                queued = await astore.mail.send_or_queue(outbox, "ann", ["bob"], "a", "b")
                assert isinstance(queued, ik.Queued)
                assert (await outbox.adrain(astore)).pending == 1
            assert await outbox.adrain(astore) == ik.DrainReport(delivered=1)
            sent = await astore.mail.send_or_queue(outbox, "ann", ["bob"], "c", "d")
            assert isinstance(sent, ik.Mail) and sent.idempotency_key is not None
            assert [m.subject for m in await astore.mail.sent("ann")] == ["c", "a"]

    asyncio.run(main())


def test_send_or_queue_checks_arguments_before_anything(outbox: ik.Outbox, store: ik.Store) -> None:
    with pytest.raises(ik.InvalidArgument, match="priority"):
        store.mail.send_or_queue(outbox, "ann", ["bob"], "s", "b", priority="high")
    assert outbox.list() == []
    assert mails_by_key(store) == {}


# ---------------------------------------------------------------------- a killed drainer

COUNT = 150


def _drain_slowly(path: str, url: str) -> None:
    with ik.open(url, migrate=False) as store:
        ik.Outbox(path).drain(store)


def test_a_drainer_killed_mid_drain_loses_nothing_and_doubles_nothing(
    tmp_path: Path, url: str, store: ik.Store
) -> None:
    """SIGKILL a drainer process while it delivers 150 queued sends, then drain again: every
    key yields exactly one mail."""
    path = tmp_path / "o.sqlite3"
    outbox = ik.Outbox(path, max_pending=COUNT, stale_after=timedelta(milliseconds=1))
    keys = [outbox.enqueue("send", {**SEND, "subject": f"m{n}"}) for n in range(COUNT)]
    ctx = multiprocessing.get_context("spawn")
    drainer = ctx.Process(target=_drain_slowly, args=(str(path), url))
    drainer.start()
    deadline = time.monotonic() + 60
    while outbox.stats()["delivered"] < 20 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert drainer.pid is not None
    os.kill(drainer.pid, signal.SIGKILL)
    drainer.join(30)
    stats = outbox.stats()
    assert 20 <= stats["delivered"] < COUNT, stats  # killed mid-drain
    time.sleep(0.01)
    report = outbox.drain(store)
    assert report.pending == report.failed == 0
    assert {op.status for op in outbox.list(include_finished=True)} == {"delivered"}
    by_key = mails_by_key(store)
    assert [by_key.get(k) for k in keys] == [1] * COUNT
    assert sum(by_key.values()) == COUNT


def test_concurrent_drainers_deliver_each_operation_once(tmp_path: Path, url: str) -> None:
    """Four threads, each with its own store, drain one file of 200 operations at once: every
    operation is delivered by exactly one of them (one attempt each), in one mail."""
    import threading

    outbox = ik.Outbox(tmp_path / "o.sqlite3", max_pending=200)
    keys = [outbox.enqueue("send", {**SEND, "subject": f"m{n}"}) for n in range(200)]
    reports: list[ik.DrainReport] = []

    def drain() -> None:
        with ik.open(url, migrate=False) as own:
            reports.append(ik.Outbox(outbox.path).drain(own))

    threads = [threading.Thread(target=drain) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(r.delivered for r in reports) == 200
    assert {op.attempts for op in outbox.list(include_finished=True)} == {1}
    with ik.open(url, migrate=False) as store:
        assert [mails_by_key(store).get(k) for k in keys] == [1] * 200
