"""Topics across processes and connections: offsets seen exactly once and in order by every
consumer while several processes publish; a queue drained by racing claimers; backends killed
during claim and complete (committed databases)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

import ikigai_store as ik
from ikigai_store import notify, ops
from ikigai_store.ops import _sql, one

pytestmark = [pytest.mark.db, pytest.mark.slow]

PUBLISHERS, PER_PUBLISHER, CONSUMERS = 8, 60, 8


@pytest.fixture
def url(ikigai_empty_db_url: str) -> Iterator[str]:
    """A fresh, migrated database."""
    with ik.open(ikigai_empty_db_url):
        pass
    yield ikigai_empty_db_url


def _publish(url: str, name: str, count: int, start: multiprocessing.synchronize.Event) -> None:
    with ik.open(url, migrate=False) as store:
        start.wait(30)
        for n in range(count):
            store.mail.publish(name, "feed", f"{name}-{n}", "x")


def test_every_consumer_sees_every_offset_once_in_order(url: str) -> None:
    """8 processes publish to one topic while 8 consumers poll-and-commit: each consumer sees
    offsets 1..N exactly once, in order, with no gap in any poll."""
    with ik.open(url, migrate=False, pool_size=CONSUMERS + 2) as store:
        store.topics.create("feed")
        for k in range(PUBLISHERS):
            store.identities.register(f"p{k}")
        for k in range(CONSUMERS):
            store.identities.register(f"c{k}")
            store.topics.subscribe(f"c{k}", "feed")
        total = PUBLISHERS * PER_PUBLISHER
        seen: dict[str, list[int]] = {f"c{k}": [] for k in range(CONSUMERS)}
        errors: list[str] = []

        def consume(name: str) -> None:
            deadline = time.monotonic() + 120
            while len(seen[name]) < total and time.monotonic() < deadline:
                batch = store.topics.poll(name, limit=50)
                offsets = [m.log_offset for m in batch.topics["feed"]]
                expected = list(
                    range(batch.offsets["feed"] + 1, batch.offsets["feed"] + 1 + len(offsets))
                )
                if offsets != expected:
                    errors.append(f"{name}: {offsets} after {batch.offsets['feed']}")
                    return
                if offsets:
                    seen[name].extend(o for o in offsets if o is not None)
                    store.topics.commit(name, "feed", offsets[-1])
                else:
                    time.sleep(0.005)

        ctx = multiprocessing.get_context("spawn")
        start = ctx.Event()
        procs = [
            ctx.Process(target=_publish, args=(url, f"p{k}", PER_PUBLISHER, start))
            for k in range(PUBLISHERS)
        ]
        for p in procs:
            p.start()
        consumers = [threading.Thread(target=consume, args=(n,)) for n in seen]
        for c in consumers:
            c.start()
        start.set()
        for p in procs:
            p.join(120)
            assert p.exitcode == 0
        for c in consumers:
            c.join(150)
        assert errors == []
        for name, offsets in seen.items():
            assert offsets == list(range(1, total + 1)), name
        assert [m.log_offset for m in store.topics.read("feed", limit=10_000)] == list(
            range(1, total + 1)
        )


def test_racing_claimers_complete_each_message_once(url: str) -> None:
    """8 claimers drain a queue of 10,000 messages: each is completed exactly once."""
    with ik.open(url, migrate=False, pool_size=12) as store:
        store.topics.create("work", "queue")
        store.identities.register("boss")
        for k in range(8):
            store.identities.register(f"w{k}")
            store.topics.subscribe(f"w{k}", "work")

        def fill(part: int) -> None:
            for n in range(2500):
                store.mail.publish("boss", "work", f"{part}-{n}", "x")

        fillers = [threading.Thread(target=fill, args=(p,)) for p in range(4)]
        for f in fillers:
            f.start()
        for f in fillers:
            f.join(300)
        done: list[int] = []
        lock = threading.Lock()

        def work(name: str) -> None:
            while (held := store.topics.claim(name, "work", ttl=60)) is not None:
                store.topics.complete(held)
                with lock:
                    done.append(held.mail.id)

        workers = [threading.Thread(target=work, args=(f"w{k}",)) for k in range(8)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(600)
        assert len(done) == 10_000 == len(set(done))
        with store._connection() as conn:
            states = conn.execute(
                "SELECT state, count(*) AS n FROM queue_items GROUP BY state"
            ).fetchall()
        assert {r["state"]: r["n"] for r in states} == {"done": 10_000}


def test_killed_backends_lose_nothing_and_complete_nothing_twice(url: str) -> None:
    """While every backend of the store is terminated over and over, claimers retrying after
    DatabaseUnavailable finish every message exactly once: none lost, none done twice."""
    with ik.open(url, migrate=False, pool_size=6, timeout=5) as store:
        store.topics.create("work", "queue", max_attempts=1000)
        store.identities.register("boss")
        for k in range(3):
            store.identities.register(f"w{k}")
            store.topics.subscribe(f"w{k}", "work")
        ids = {store.mail.publish("boss", "work", str(n), "x").id for n in range(300)}
        completed: list[int] = []
        outages: list[int] = []
        lock = threading.Lock()
        stop = threading.Event()

        def work(name: str) -> None:
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 5:
                try:
                    held = store.topics.claim(name, "work", ttl=0.5)
                    if held is None:
                        time.sleep(0.05)
                        continue
                    idle_since = time.monotonic()
                    store.topics.complete(held)
                    with lock:
                        completed.append(held.mail.id)
                except ik.DatabaseUnavailable:
                    outages.append(1)
                    time.sleep(0.01)  # ambiguous: the lease expires and the work comes back
                except ik.Conflict:
                    pass  # complete committed before the connection died, or the lease lapsed

        def kill() -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                while not stop.wait(0.05):
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )

        killer = threading.Thread(target=kill)
        workers = [threading.Thread(target=work, args=(f"w{k}",)) for k in range(3)]
        killer.start()
        for w in workers:
            w.start()
        time.sleep(3)
        stop.set()
        killer.join()
        for w in workers:
            w.join(120)
        assert len(outages) > 0  # the backends really died under the claimers
        assert len(completed) == len(set(completed))  # never acknowledged twice
        with store._connection() as conn:
            states = conn.execute(
                "SELECT state, count(*) AS n FROM queue_items GROUP BY state"
            ).fetchall()
        assert {r["state"]: r["n"] for r in states} == {"done": len(ids)}  # none lost
        assert set(completed) <= ids


def test_rows_available_again_notify_their_topic_on_commit(url: str) -> None:
    """release (to available) and requeue notify ikigai_queue with the topic id, on commit;
    publish notifies too while the topic is listened to (before: nothing); claims,
    completions and a release that dead-letters do not."""
    with ik.open(url, migrate=False) as store, psycopg.connect(url, autocommit=True) as ear:
        for name in ("pub", "w"):
            store.identities.register(name)
        jobs = store.topics.create("jobs", "queue", max_attempts=2)
        store.topics.subscribe("w", "jobs")
        ear.execute("LISTEN ikigai_queue")

        def heard() -> list[str]:
            return [n.payload for n in ear.notifies(timeout=0.3)]

        store.mail.publish("pub", "jobs", "unheard", "x")
        assert heard() == []  # nobody waits on the topic (migration 0050)
        assert store._run(notify.listen_topics([jobs.id], timedelta(minutes=1))) == 1
        job = store.mail.publish("pub", "jobs", "j", "x")
        assert heard() == [str(jobs.id)]
        assert store.topics.claim("w", "jobs") is not None  # "unheard"
        assert heard() == []
        held = store.topics.claim("w", "jobs")
        assert held is not None and heard() == []
        with store.transaction():
            assert store.topics.release(held, error="again") == "available"
            assert heard() == []  # not before commit
        assert heard() == [str(jobs.id)]
        held = store.topics.claim("w", "jobs")
        assert held is not None and store.topics.release(held) == "dead"
        assert heard() == []
        store.topics.requeue(job.id)
        assert heard() == [str(jobs.id)]
        held = store.topics.claim("w", "jobs")
        assert held is not None
        assert store.topics.claim("w", "jobs", complete=held) is None
        assert heard() == []


def _publish_pending(
    conn: psycopg.Connection[Any], sender: str, topic: str, subject: str
) -> dict[str, Any]:
    """Publish ``subject`` from ``sender`` to ``topic`` on ``conn`` (raw SQL, no sequencer run
    after it) while the topic's sequencer lock is held elsewhere (as a sequencer would), so
    the mail is pending: the publish does not update the topic's row, only its foreign keys
    lock it (KEY SHARE). Returns the row (its ``log_offset`` is None)."""
    with psycopg.connect(conn.info.dsn) as holder:  # its lock goes when this block ends
        holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('topic-sequencer:' || id, 7))"
            " FROM topics WHERE name = %s",
            (topic,),
        )
        row = (
            conn.cursor(row_factory=dict_row)
            .execute(
                _sql(one("publish_mail")),
                {
                    "sender": sender,
                    "topic": topic,
                    "subject": subject,
                    "body": "x",
                    "priority": "normal",
                    "attachments": None,
                    "metadata": None,
                    "idempotency_key": None,
                    "request_hash": "h",
                    "new_thread_id": f"t-{subject}-{topic}",
                    "delay": None,
                },
            )
            .fetchone()
        )
    assert row is not None and row["log_offset"] is None
    return row


def _publish_orphan(url: str, topic: str) -> dict[str, Any]:
    """Publish "orphan" from ``a`` to ``topic`` as a publisher that then dies: its mail
    commits pending, and no sequencer runs for it. Returns the row."""
    with psycopg.connect(url, autocommit=True) as conn:
        return _publish_pending(conn, "a", topic, "orphan")


def test_a_mail_left_pending_gets_its_offset_from_the_next_publish(url: str) -> None:
    """A publish that found the sequencer lock taken commits its mail pending; if it dies
    before sequencing, the mail is in the inbox and not in the log (no offset, none taken);
    the next publish to the topic sequences it first (the lower mail id), and then itself,
    with no gap."""
    with ik.open(url, migrate=False) as store:
        store.topics.create("feed")
        for name in ("a", "b", "c"):
            store.identities.register(name)
        store.topics.subscribe("c", "feed")
        assert store.mail.publish("a", "feed", "one", "x").log_offset == 1
        row = _publish_orphan(url, "feed")
        orphan = row["id"]
        assert store.topics.list()[0].last_offset == 1
        assert "orphan" in [i.mail.subject for i in store.mail.inbox("c")]
        # A read that stops before the end of the log leaves it pending.
        assert [m.subject for m in store.topics.read("feed", limit=1)] == ["one"]
        assert store.topics.list()[0].last_offset == 1
        third = store.mail.publish("b", "feed", "three", "x")
        assert third.log_offset == 3
        log = store.topics.read("feed")
        assert [(m.subject, m.log_offset) for m in log] == [
            ("one", 1),
            ("orphan", 2),
            ("three", 3),
        ]
        assert log[1].id == orphan


def test_publishes_in_a_transaction_take_offsets_only_when_it_commits(url: str) -> None:
    """Inside store.transaction() publish sequences in the caller's transaction: a rolled-back
    one takes no offset (the next publish gets it), committed ones keep what they returned."""
    with ik.open(url, migrate=False) as store:
        store.topics.create("feed")
        store.identities.register("a")
        with pytest.raises(ZeroDivisionError), store.transaction():
            assert store.mail.publish("a", "feed", "gone", "x").log_offset == 1
            raise ZeroDivisionError
        with store.transaction():
            got = [store.mail.publish("a", "feed", f"s{k}", "x").log_offset for k in range(2)]
            got += [m.log_offset for m in store.mail.publish_many("a", "feed", ["p", "q"])]
        assert got == [1, 2, 3, 4]
        assert [m.log_offset for m in store.topics.read("feed")] == [1, 2, 3, 4]
        assert store.topics.list()[0].last_offset == 4


def test_a_mail_left_pending_gets_its_offset_from_a_reader_at_the_end_of_the_log(
    url: str,
) -> None:
    """A mail whose publisher died between its commit and the sequencer, on a topic nobody
    publishes to again, is not lost from the log: the next read that reaches the end of the
    log sequences it and returns it at the next offset."""
    with ik.open(url, migrate=False) as store:
        store.topics.create("quiet")
        store.identities.register("a")
        assert store.mail.publish("a", "quiet", "one", "x").log_offset == 1
        row = _publish_orphan(url, "quiet")
        log = store.topics.read("quiet", after=1)
        assert [(m.subject, m.log_offset, m.id) for m in log] == [("orphan", 2, row["id"])]
        assert store.topics.list()[0].last_offset == 2
        assert [m.log_offset for m in store.topics.read("quiet")] == [1, 2]


def test_a_publish_that_does_not_wait_returns_pending_and_the_log_stays_gapless(url: str) -> None:
    """With the topic's sequencer busy (its lock held elsewhere), publish and publish_many
    with wait_for_offset=False return at once, their mails committed and pending (log_offset
    None); they are not in the log yet, and the next read at its end gives them the next
    offsets in id order, with no gap. Without contention such a publish gets its offset in
    its own statement, as any publish. A non-bool is refused before anything is written."""
    with ik.open(url, migrate=False) as store:
        store.topics.create("fast", kind="queue")
        store.identities.register("a")
        store.identities.register("w")
        store.topics.subscribe("w", "fast")
        assert store.mail.publish("a", "fast", "s", "0", wait_for_offset=False).log_offset == 1
        with psycopg.connect(url) as holder:
            holder.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('topic-sequencer:' || id, 7))"
                " FROM topics WHERE name = 'fast'"
            )
            one = store.mail.publish("a", "fast", "s", "1", wait_for_offset=False)
            batch = store.mail.publish_many("a", "fast", ["2", "3"], wait_for_offset=False)
            assert [m.log_offset for m in [one, *batch]] == [None, None, None]
            assert store.topics.claim("w", "fast") is not None  # claimable already
            holder.rollback()
        log = store.topics.read("fast")
        assert [(m.body, m.log_offset) for m in log] == [("0", 1), ("1", 2), ("2", 3), ("3", 4)]
        for bad in ("no", 0, None):
            with pytest.raises(ik.InvalidArgument, match="wait_for_offset must be a bool"):
                store.mail.publish("a", "fast", "s", "x", wait_for_offset=bad)
            with pytest.raises(ik.InvalidArgument, match="wait_for_offset must be a bool"):
                store.mail.publish_many("a", "fast", ["x"], wait_for_offset=bad)
        assert len(store.topics.read("fast")) == 4


def test_a_blocking_claim_wakes_when_a_delayed_message_falls_due(url: str) -> None:
    """claim(wait=) sleeps until the queue's next delayed message is due (claim_refusal), not
    to the end of its wait: a message published 0.5 s ahead is claimed about then. A release
    with a delay wakes the waiter to look again (the next due time may be sooner)."""
    with ik.open(url, pool_size=2) as store:
        store.identities.register("p")
        store.identities.register("w")
        store.topics.create("later", "queue")
        store.topics.subscribe("w", "later")
        sent = store.mail.publish("p", "later", "s", "b", delay=0.5)
        start = time.monotonic()
        got = store.topics.claim("w", "later", wait=20)
        took = time.monotonic() - start
        assert got is not None and got.mail.id == sent.id
        assert 0.3 < took < 10  # woken by the due time (not at 20 s), not before it
        results: dict[str, Any] = {}

        def wait() -> None:
            results["claim"] = store.topics.claim("w", "later", wait=20)
            results["took"] = time.monotonic() - begun

        begun = time.monotonic()
        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.3)  # the waiter sleeps with no deadline sooner than its wait
        assert store.topics.release(got, delay=0.5) == "available"
        thread.join(timeout=30)
        assert results["claim"] is not None and results["claim"].mail.id == sent.id
        assert results["took"] < 10


def _subscribed_queue(store: ik.Store) -> None:
    """Identities pub and w; queue topic "jobs", w subscribed."""
    for name in ("pub", "w"):
        store.identities.register(name)
    store.topics.create("jobs", "queue")
    store.topics.subscribe("w", "jobs")


def _claim_in_thread(store: ik.Store, wait: float) -> tuple[threading.Thread, list[Any]]:
    """A blocking claim by w on "jobs", started now; the list gets (its result, seconds)."""
    got: list[Any] = []

    def claim() -> None:
        started = time.monotonic()
        got.append((store.topics.claim("w", "jobs", wait=wait), time.monotonic() - started))

    waiter = threading.Thread(target=claim)
    waiter.start()
    return waiter, got


def test_a_publish_nobody_waits_for_keeps_no_wake_up(url: str) -> None:
    """A publish to a queue topic nobody waits on keeps no wake-up (the server raises no
    WAKES_NOTICE, so the library sends nothing after the commit: one round trip); while a
    claim waits on the topic, a publish keeps one, and the claim wakes at once."""
    with ik.open(url, migrate=False, pool_size=1) as store:
        _subscribed_queue(store)
        said: list[str | None] = []
        with store._connection() as conn:  # the pool's one connection
            conn.add_notice_handler(lambda d: said.append(d.message_primary))
        store.mail.publish("pub", "jobs", "first", "x")
        assert ops.WAKES_NOTICE not in said
        assert store.topics.claim("w", "jobs") is not None
        waiter, got = _claim_in_thread(store, wait=10)
        time.sleep(0.5)  # registered, asleep
        store.mail.publish("pub", "jobs", "second", "x")
        waiter.join(10)
        assert ops.WAKES_NOTICE in said
        ((claimed, seconds),) = got
        assert claimed is not None and claimed.mail.subject == "second"
        assert seconds < 2  # woken, not at its deadline


def test_a_claim_going_to_sleep_waits_for_publishes_in_flight(url: str) -> None:
    """A publish whose statement ran before a claim registered its wait (so it decided not to
    notify) commits after the claim looked: the registration waits for that commit, and the
    claim's last look finds the message (it does not sleep to its deadline). A publish still
    in flight at the claim's deadline does not hold it past it."""
    with ik.open(url, migrate=False) as store, psycopg.connect(url) as publisher:  # in flight
        _subscribed_queue(store)
        _publish_pending(publisher, "pub", "jobs", "in flight")
        waiter, got = _claim_in_thread(store, wait=10)
        time.sleep(0.5)  # the claim found nothing, listens, and waits to register
        assert waiter.is_alive() and got == []
        publisher.commit()
        waiter.join(10)
        ((claimed, seconds),) = got
        assert claimed is not None and claimed.mail.subject == "in flight"
        assert seconds < 2
        _publish_pending(publisher, "pub", "jobs", "late")
        waiter, got = _claim_in_thread(store, wait=0.5)
        waiter.join(10)
        ((claimed, seconds),) = got
        assert claimed is None and seconds < 1.5
        with psycopg.connect(url) as caller:  # the caller's lock_timeout survives a refusal
            caller.execute("SET lock_timeout = '5s'")
            listen = "SELECT ikigai_queue_listen(id, 60, 0.05) FROM topics WHERE name = 'jobs'"
            assert caller.execute(listen).fetchone() == (False,)
            assert caller.execute("SHOW lock_timeout").fetchone() == ("5s",)
        publisher.commit()
        assert store.topics.claim("w", "jobs") is not None


def test_racing_retries_of_a_keyed_batch_store_it_once(url: str) -> None:
    """Eight connections publish the same keyed batch at once (a retry racing the original):
    each gets the same three mails back, the topic holds three mails at offsets 1-3, and the
    key on a different batch is a Conflict."""
    with ik.open(url, migrate=False, pool_size=10) as store:
        store.identities.register("batcher")
        store.topics.create("jobs", "queue")
        barrier = threading.Barrier(8)
        results: list[Any] = [None] * 8

        def publish(k: int) -> None:
            barrier.wait(30)
            try:
                results[k] = store.mail.publish_many(
                    "batcher", "jobs", ["a", "b", "c"], idempotency_key="run-1"
                )
            except ik.IkigaiStoreError as exc:
                results[k] = exc

        threads = [threading.Thread(target=publish, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        first = [(m.id, m.log_offset, m.body) for m in results[0]]
        assert all([(m.id, m.log_offset, m.body) for m in r] == first for r in results), results
        assert [(m.log_offset, m.body) for m in store.topics.read("jobs")] == [
            (1, "a"),
            (2, "b"),
            (3, "c"),
        ]
        with pytest.raises(ik.Conflict, match="used for a different request"):
            store.mail.publish_many("batcher", "jobs", ["a", "b"], idempotency_key="run-1")
        assert len(store.topics.read("jobs")) == 3
