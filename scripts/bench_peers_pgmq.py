"""Benchmark report: topic publish and queue drain against pgmq, same server, same run (issue 38).

Usage: ``python scripts/bench_peers_pgmq.py [--database URL] [--messages N] [--quick]``
(with no URL: ``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server).

pgmq 1.5.1 is loaded from its SQL-only install script, vendored in ``scripts/vendor/pgmq/``
(see its README), into a scratch database on the same server; ikigai_store gets a scratch
database of its own, migrated. Every message has a 1 KB body (pgmq: a JSONB message
``{"subject", "body"}`` with the same 1 KB body). Workers are processes (multiprocessing,
spawn), each with its own connection (ours: an ``ik.Store`` with ``pool_size=1`` and its own
identity; pgmq: an autocommit psycopg connection calling pgmq's SQL functions, prepared). Each
worker warms up, then all start together at a barrier; throughput is messages / (last finish
- first start); latency is the p50 of each worker's per-call wall times. For each measure the
two sides run one after the other, the side going first alternating between measures.

1. Send, single messages, from 4 and from 16 producers to one queue: ours ``store.mail.publish``
   to a queue topic vs ``pgmq.send``; and, for information, the mechanism alone: our two
   statements run raw (publish_mail, then sequence_mail when the mail is pending) vs the
   serialised writers the sequencer replaced (0027's publish: the topic row locked to commit;
   ``SERIAL_PUBLISH``, raw on today's schema), both checked as ours. While ours runs, a
   reader in this process follows the topic's log with ``store.topics.read(after=last)`` and
   checks what a consumer must see: the offsets it gets continue its last one with no hole
   and never go back. After the run: the topic's offsets are exactly 1..N, one per mail, none
   pending; each producer's offsets increase in its call order; pgmq's queue holds N
   messages.
   The same again with ``publish(..., wait_for_offset=False)``: a publisher whose mail
   commits pending (the sequencer busy) returns without running the sequencer; the follower
   and the reads give the offsets. Checked the same way (the offsets a producer's mails end
   up with increase in its call order; an offset a publish returned is its mail's).
   The same again, waiting and not, to a topic created ``searchable=False`` (its mail is not
   parsed for full-text search at publish: pgmq's messages are not searchable either). And
   the unsearchable not-waiting publish once more to a topic registered as a blocking claim
   registers it (migration 0050: only then does a publish notify, and the library send the
   wake-up after its commit): an info row gives the topic nobody waits on over it.
2. Send, batches of 100 from 4 producers: ours ``store.mail.publish_many`` vs
   ``pgmq.send_batch``; checked as in 1; and to an unsearchable topic.
3. Drain N messages at 4 and at 16 workers, exactly once: ours ``held = store.topics.claim(...,
   complete=held)`` (one round trip per message) until a claim finds nothing; pgmq
   ``pgmq.read(queue, vt => 30, qty => 1)`` (the message's columns, the JSON body parsed, as
   pgmq's Python client reads them) then ``pgmq.delete`` (and, a second pgmq column,
   ``pgmq.archive``, its keep-a-record mode). Checked: the ids the workers processed are N
   distinct ids, exactly the queue's; ours: every queue row done after one attempt; pgmq: the
   queue is empty (archive: the archive holds the N).

Where the time goes (a line per send measure): server commits per message
(``pg_stat_database.xact_commit``), WAL bytes per message (``pg_current_wal_lsn``), and for ours
the sequencer's calls and mean time per call (``pg_stat_user_functions`` with
``track_functions = 'pl'`` set on the scratch database). ``pg_stat_statements`` is not loaded on
the embedded server. For every measure, the CPU per message of the workers (client side) and of
their backends (read from ``/proc/<pid>/stat`` when the server runs on this machine, as the
embedded one does): an info row gives pgmq's over ours. Throughput is measured one side after
the other, so what else the machine runs meanwhile moves its ratio; CPU per message it moves
much less (the WAL flush is a wait, not CPU; the sequencer's and the follower's backends are
not counted).

Nothing is asserted on timings (the exit status is non-zero only on errors or a failed
correctness check). Scratch databases ``ikigai_bench_<pid>_pgmq_<role>`` are dropped at the end,
even on failure. The machine may be shared: compare ratios within one run, run twice.
``--quick``: a smoke run (400 messages).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from benchkit import (
    Row,
    Scratch,
    arguments,
    backend_cpu,
    environment,
    run,
    server_url,
    summary,
)

import ikigai_store as ik
from ikigai_store import notify
from ikigai_store.config import admin_url
from ikigai_store.ops import _sql, one
from ikigai_store.pool import create_database

PGMQ_SQL = Path(__file__).parent / "vendor" / "pgmq" / "pgmq.sql"
PGMQ_VERSION = "1.5.1"
BODY_1K = ("The nightly build of branch main finished; artifacts are in the usual place. " * 14)[
    :1024
]
SUBJECT = "job"
TOPIC = "bench"
WARM = "warm"
BATCH = 100


# ------------------------------------------------------------------------------------ workers


@dataclass
class Result:
    """What one worker did: its start and end (perf_counter, shared by the processes on
    Linux: CLOCK_MONOTONIC), per-call seconds, and the ids (and, ours, offsets) it got."""

    start: float
    end: float
    calls: list[float] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    cpu: float = 0.0  # the worker's own CPU seconds (client side)
    server: float | None = None  # its backend's CPU seconds (None: not readable here)


def pgmq_message() -> str:
    return json.dumps({"subject": SUBJECT, "body": BODY_1K})


def worker(job: str, url: str, me: str, count: int, topic: str, barrier: Any, out: Any) -> None:
    """Run one worker of ``job`` (``ours_send``, ``pgmq_send``, ``ours_batch``, ``pgmq_batch``,
    ``ours_drain``, ``pgmq_drain_delete``, ``pgmq_drain_archive``) and put its ``Result``."""
    try:
        out.put(_work(job, url, me, count, topic, barrier))
    except BaseException as exc:  # reported by the parent, which then fails
        barrier.abort()
        out.put(f"{job} {me}: {type(exc).__name__}: {exc}")


def _work(job: str, url: str, me: str, count: int, topic: str, barrier: Any) -> Result:
    warm = WARM if job.startswith("pgmq") else f"{topic}-warm"
    calls: list[float] = []
    ids: list[int] = []
    offsets: list[int] = []
    if job in ("serial_send", "raw_send"):
        return _serial(url, me, count, topic, warm, barrier, job == "raw_send")
    if job.startswith("ours"):
        with ik.Store(url, pool_size=1) as store:
            lazy = job.startswith("ours_send_lazy")
            job = job.removesuffix("_unsearchable")
            if job in ("ours_send", "ours_send_lazy"):
                for _ in range(5):
                    store.mail.publish(me, warm, SUBJECT, BODY_1K)
            elif job == "ours_batch":
                store.mail.publish_many(me, warm, [BODY_1K] * BATCH, subject=SUBJECT)
            else:
                store.topics.claim(me, warm, ttl=30)
            with store._pool.connection() as conn:
                pid = int(conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"])
            barrier.wait()
            start, cpu, server = time.perf_counter(), time.process_time(), backend_cpu(pid)
            if job in ("ours_send", "ours_send_lazy"):
                for _ in range(count):
                    t0 = time.perf_counter()
                    mail = store.mail.publish(me, topic, SUBJECT, BODY_1K, wait_for_offset=not lazy)
                    calls.append(time.perf_counter() - t0)
                    ids.append(mail.id)
                    offsets.append(mail.log_offset or 0)
            elif job == "ours_batch":
                for _ in range(count // BATCH):
                    t0 = time.perf_counter()
                    mails = store.mail.publish_many(me, topic, [BODY_1K] * BATCH, subject=SUBJECT)
                    calls.append(time.perf_counter() - t0)
                    ids.extend(m.id for m in mails)
                    offsets.extend(m.log_offset or 0 for m in mails)
            else:
                held = None
                while True:
                    t0 = time.perf_counter()
                    held = store.topics.claim(me, topic, ttl=30, complete=held)
                    calls.append(time.perf_counter() - t0)
                    if held is None:
                        break
                    ids.append(held.mail.id)
            return Result(
                start,
                time.perf_counter(),
                calls,
                ids,
                offsets,
                time.process_time() - cpu,
                _spent(pid, server),
            )
    with psycopg.connect(url, autocommit=True) as conn:
        msg = pgmq_message()
        if job == "pgmq_send":
            for _ in range(5):
                conn.execute("SELECT pgmq.send(%s, %s::jsonb)", (warm, msg), prepare=True)
        elif job == "pgmq_batch":
            conn.execute("SELECT pgmq.send_batch(%s, %s::jsonb[])", (warm, [msg] * BATCH))
        else:
            conn.execute("SELECT * FROM pgmq.read(%s, 30, 1)", (warm,), prepare=True)
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        pid = int(row[0])
        barrier.wait()
        start, cpu, server = time.perf_counter(), time.process_time(), backend_cpu(pid)
        if job == "pgmq_send":
            for _ in range(count):
                t0 = time.perf_counter()
                row = conn.execute(
                    "SELECT pgmq.send(%s, %s::jsonb)", (topic, msg), prepare=True
                ).fetchone()
                calls.append(time.perf_counter() - t0)
                assert row is not None
                ids.append(int(row[0]))
        elif job == "pgmq_batch":
            for _ in range(count // BATCH):
                t0 = time.perf_counter()
                rows = conn.execute(
                    "SELECT * FROM pgmq.send_batch(%s, %s::jsonb[])",
                    (topic, [msg] * BATCH),
                    prepare=True,
                ).fetchall()
                calls.append(time.perf_counter() - t0)
                ids.extend(int(r[0]) for r in rows)
        else:
            finish = "delete" if job == "pgmq_drain_delete" else "archive"
            while True:
                t0 = time.perf_counter()
                # Every column of the message, as pgmq's Python client reads it (its Message:
                # msg_id, read_ct, enqueued_at, vt, message): a worker processes the body.
                got = conn.execute(
                    "SELECT msg_id, read_ct, enqueued_at, vt, message FROM pgmq.read(%s, 30, 1)",
                    (topic,),
                    prepare=True,
                ).fetchone()
                if got is None:
                    calls.append(time.perf_counter() - t0)
                    break
                done = conn.execute(
                    f"SELECT pgmq.{finish}(%s, %s::bigint)", (topic, got[0]), prepare=True
                ).fetchone()
                calls.append(time.perf_counter() - t0)
                if not done or done[0] is not True:
                    raise RuntimeError(f"pgmq.{finish} of {got[0]} did not finish it")
                ids.append(int(got[0]))
        return Result(
            start,
            time.perf_counter(),
            calls,
            ids,
            offsets,
            time.process_time() - cpu,
            _spent(pid, server),
        )


def _spent(pid: int, before: float | None) -> float | None:
    """The CPU seconds backend ``pid`` used since ``before`` (None: not readable here)."""
    now = backend_cpu(pid)
    return None if now is None or before is None else now - before


#: The baseline of serialised writers (how publish_mail worked until migration 0027), written
#: on today's schema and run raw: the topic row locked FOR UPDATE, held to commit, the mail
#: and its topic_log row written with offset next_offset, next_offset bumped, the queue row.
SERIAL_PUBLISH = """
WITH t AS (
    SELECT id, kind, next_offset FROM topics WHERE name = %(topic)s FOR UPDATE
), s AS (
    SELECT id FROM identities WHERE name = %(sender)s
), posted AS (
    SELECT post_mail(thread_id => 't', sender_id => s.id, recipient_ids => '{}',
                     recipients => '{}', subject => %(subject)s, body => %(body)s,
                     priority => 'normal', metadata => 'null', topic_id => t.id) AS mail
    FROM t, s
), m AS (
    SELECT (posted.mail).* FROM posted
), bump AS (
    UPDATE topics SET next_offset = t.next_offset + 1 FROM t, m WHERE topics.id = t.id
), logged AS (
    INSERT INTO topic_log (mail_id, topic_id, log_offset)
    SELECT m.id, t.id, t.next_offset FROM m, t
), queued AS (
    INSERT INTO queue_items (mail_id, topic_id) SELECT m.id, t.id FROM m, t WHERE t.kind = 'queue'
)
SELECT m.id, t.next_offset FROM m, t
"""


def _serial(
    url: str, me: str, count: int, topic: str, warm: str, barrier: Any, ours: bool
) -> Result:
    """A raw publisher: the serialised writers' statement, or (``ours``) our two statements,
    publish_mail then, when the mail is pending, sequence_mail, as ``publish`` runs them."""
    calls: list[float] = []
    ids: list[int] = []
    offsets: list[int] = []
    pub, seq = _sql(one("publish_mail")), _sql(one("sequence_mail"))
    params = {"sender": me, "subject": SUBJECT, "body": BODY_1K}
    ours_params = {
        **params,
        "priority": "normal",
        "attachments": None,
        "metadata": None,
        "idempotency_key": None,
        "request_hash": "h",
        "new_thread_id": "t",
        "delay": None,
    }

    def publish(where: str) -> tuple[int, int]:
        if not ours:
            row = conn.execute(SERIAL_PUBLISH, {**params, "topic": where}, prepare=True).fetchone()
            assert row is not None
            return int(row[0]), int(row[1])
        row = conn.execute(pub, {**ours_params, "topic": where}, prepare=True).fetchone()
        assert row is not None
        mail_id, topic_id, offset = row[0], row[14], row[16]
        if offset is None:
            got = conn.execute(
                seq, {"topic_id": topic_id, "mail_ids": [mail_id]}, prepare=True
            ).fetchone()
            assert got is not None
            offset = got[1]
        return int(mail_id), int(offset)

    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(5):
            publish(warm)
        barrier.wait()
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            t0 = time.perf_counter()
            mail_id, offset = publish(topic)
            calls.append(time.perf_counter() - t0)
            ids.append(mail_id)
            offsets.append(offset)
        return Result(start, time.perf_counter(), calls, ids, offsets, time.process_time() - cpu)


def spawn(
    job: str, url: str, names: list[str], counts: list[int], topic: str, reader: Any = None
) -> list[Result]:
    """Run one worker per name; ``reader``, if given, is called repeatedly while they run."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(names) + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(job, url, n, c, topic, barrier, out))
        for n, c in zip(names, counts, strict=True)
    ]
    for p in procs:
        p.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a worker failed: see its message
        barrier.wait(timeout=120)
    results: list[Any] = []
    while len(results) < len(procs):
        if reader is not None:
            reader()
        while not out.empty() and len(results) < len(procs):
            results.append(out.get())
        if len(results) < len(procs):
            time.sleep(0.005)
    for p in procs:
        p.join()
    errors = [r for r in results if isinstance(r, str)]
    if errors:
        raise RuntimeError("; ".join(errors))
    return results


# ------------------------------------------------------------------------------------ setup


def pgmq_database(scratch: Scratch) -> str:
    """A scratch database with pgmq installed from its SQL script."""
    name = f"ikigai_bench_{os.getpid()}_pgmq_peer"
    create_database(scratch.server_url, name)
    scratch.created.append(name)
    url = admin_url(scratch.server_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(PGMQ_SQL.read_text())  # type: ignore[arg-type]
    return url


def pgmq_queue(url: str, fill: int = 0) -> None:
    """Fresh ``bench`` and ``warm`` queues; ``bench`` holds ``fill`` messages."""
    with psycopg.connect(url, autocommit=True) as conn:
        for q in (TOPIC, WARM):
            conn.execute("SELECT pgmq.drop_queue(%s) FROM pgmq.meta WHERE queue_name = %s", (q, q))
            conn.execute("SELECT pgmq.create(%s)", (q,))
        msg = pgmq_message()
        for k in range(0, fill, 1000):
            size = min(1000, fill - k)
            conn.execute("SELECT pgmq.send_batch(%s, %s::jsonb[])", (TOPIC, [msg] * size))
        conn.execute("SELECT pgmq.send_batch(%s, %s::jsonb[])", (WARM, [msg] * 200))
        conn.execute("VACUUM ANALYZE")


def ours_topic(
    url: str,
    names: list[str],
    topic: str,
    fill: int = 0,
    *,
    searchable: bool = True,
    listened: bool = False,
) -> None:
    """New queue topics ``topic`` and ``topic-warm``, every name registered and subscribed;
    ``topic`` holds ``fill`` messages (published in batches through the store). ``listened``:
    registered for an hour as a blocking claim registers its topic (migration 0050), so its
    publishes notify (and the library sends the wake-up after each commit)."""
    with ik.Store(url, pool_size=1) as store:
        for t in (topic, f"{topic}-warm"):
            created = store.topics.create(t, "queue", searchable=searchable)
            if listened:
                store._run(notify.listen_topics([created.id], timedelta(hours=1)))
        for n in ["filler", *names]:
            with contextlib.suppress(ik.Conflict):
                store.identities.register(n)
            store.topics.subscribe(n, topic)
            store.topics.subscribe(n, f"{topic}-warm")
        for k in range(0, fill, 1000):
            size = min(1000, fill - k)
            store.mail.publish_many("filler", topic, [BODY_1K] * size, subject=SUBJECT)
        store.mail.publish_many("filler", f"{topic}-warm", [BODY_1K] * 200, subject=SUBJECT)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def counters(url: str) -> tuple[int, int]:
    """(commits of the database so far, WAL position in bytes)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute(
            "SELECT xact_commit, pg_current_wal_lsn() - '0/0'::pg_lsn "
            "FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def sequencer_stats(url: str) -> tuple[int, float]:
    """(calls of sequence_topic, total ms) so far (flushed when the workers' backends exit)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT COALESCE(sum(calls), 0), COALESCE(sum(total_time), 0) "
            "FROM pg_stat_user_functions WHERE funcname = 'sequence_topic'"
        ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1])


# ------------------------------------------------------------------------------------ measures


@dataclass
class Side:
    rate: float
    p50: float
    commits: float
    wal: float
    cpu: float  # client CPU seconds per message
    server: float | None  # the workers' backends' CPU seconds per message (None: not readable)


def measure(
    job: str, url: str, names: list[str], counts: list[int], topic: str, reader: Any = None
) -> tuple[Side, list[Result]]:
    """Run ``job``'s workers on ``topic``: the side's throughput, p50 and costs per message."""
    time.sleep(0.5)  # let the backends of the setup exit
    c0, w0 = counters(url)
    results = spawn(job, url, names, counts, topic, reader)
    c1, w1 = counters(url)
    n = sum(len(r.ids) for r in results)
    span = max(r.end for r in results) - min(r.start for r in results)
    p50 = statistics.median(x for r in results for x in r.calls)
    cpu = sum(r.cpu for r in results) / n
    spent = [r.server for r in results]
    server = None if None in spent else sum(x or 0.0 for x in spent) / n
    return Side(n / span, p50, (c1 - c0) / n, (w1 - w0) / n, cpu, server), results


class LogFollower:
    """A consumer following the topic's log: each read continues its last offset with no
    hole, and nothing already read appears again (called while the producers run)."""

    def __init__(self, store: ik.Store, topic: str) -> None:
        self.store = store
        self.topic = topic
        self.last = 0
        self.seen: list[int] = []
        self.reads = 0

    def __call__(self) -> None:
        mails = self.store.topics.read(self.topic, after=self.last, limit=1000)
        self.reads += 1
        for m in mails:
            if m.log_offset != self.last + 1:
                raise RuntimeError(f"reader after {self.last} got offset {m.log_offset}")
            self.last = m.log_offset
            self.seen.append(m.id)


def check_ours_send(
    url: str, topic: str, results: list[Result], follower: LogFollower
) -> str | None:
    """Why our send run broke the log's rules (None: it did not)."""
    follower()  # the rest of the log
    ids = [i for r in results for i in r.ids]
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT l.log_offset, l.mail_id FROM topic_log AS l JOIN topics AS t "
            "ON t.id = l.topic_id WHERE t.name = %s ORDER BY l.log_offset NULLS LAST",
            (topic,),
        ).fetchall()
    offsets = [r[0] for r in rows]
    if offsets != list(range(1, len(ids) + 1)):
        return f"offsets are not 1..{len(ids)} (pending or holes): {offsets[:5]}..."
    if sorted(r[1] for r in rows) != sorted(ids) or len(set(ids)) != len(ids):
        return "the log's mails are not the ones published"
    if follower.seen != [r[1] for r in rows]:
        return "the follower did not read the whole log in offset order"
    final = {m: o for o, m in rows}
    for r in results:
        got = [final[m] for m in r.ids]
        if got != sorted(got) or len(set(got)) != len(got):
            return "a producer's offsets do not increase in its call order"
        # A publish that did not wait for its offset may return none (0 here): it has one now.
        if any(o not in (0, final[m]) for m, o in zip(r.ids, r.offsets, strict=True)):
            return "a publish returned an offset its mail does not have"
    return None


def check_pgmq_send(url: str, n: int, results: list[Result]) -> str | None:
    ids = [i for r in results for i in r.ids]
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM pgmq.q_{TOPIC}").fetchone()
    if len(set(ids)) != n or row is None or row[0] != n:
        return f"pgmq queue holds {row} messages for {n} sent"
    return None


def check_ours_drain(url: str, topic: str, n: int, results: list[Result]) -> str | None:
    ids = [i for r in results for i in r.ids]
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT q.mail_id, q.state, q.attempts FROM queue_items AS q JOIN topics AS t "
            "ON t.id = q.topic_id WHERE t.name = %s",
            (topic,),
        ).fetchall()
    if len(ids) != n or len(set(ids)) != n or set(ids) != {r[0] for r in rows}:
        return f"processed {len(ids)} ({len(set(ids))} distinct) of {n}"
    if any(r[1] != "done" or r[2] != 1 for r in rows):
        return "a queue row is not done after exactly one attempt"
    return None


def check_pgmq_drain(url: str, n: int, results: list[Result], archive: bool) -> str | None:
    ids = [i for r in results for i in r.ids]
    with psycopg.connect(url) as conn:
        left = conn.execute(f"SELECT count(*) FROM pgmq.q_{TOPIC}").fetchone()
        kept = conn.execute(f"SELECT count(*) FROM pgmq.a_{TOPIC}").fetchone()
    if len(ids) != n or len(set(ids)) != n or set(ids) != set(range(1, n + 1)):
        return f"processed {len(ids)} ({len(set(ids))} distinct) of {n}"
    if left != (0,) or kept != ((n,) if archive else (0,)):
        return f"pgmq left {left} in the queue, {kept} in the archive"
    return None


def anatomy(ours: str, peer: str, rounds: int) -> None:
    """Where a single publish's time goes, one connection, no contention: p50 of each piece,
    interleaved call by call: pgmq.send; our publish through the store; its two statements
    run raw (the publish_mail insert, which takes the offset itself when no one else holds the
    sequencer lock, as here, then sequence_mail, which then only reads it); a bare INSERT of a
    mail row (its
    indexes, the generated search vector); the search vector of the 1 KB body alone
    (to_tsvector, which mail's generated column runs); and a round trip (SELECT 1)."""
    ours_topic(ours, ["solo"], "anatomy")
    pub_sql, seq_sql = _sql(one("publish_mail")), _sql(one("sequence_mail"))
    times: dict[str, list[float]] = {}
    msg = pgmq_message()
    with (
        ik.Store(ours, pool_size=1) as store,
        psycopg.connect(ours, autocommit=True) as raw,
        psycopg.connect(peer, autocommit=True) as pq,
    ):
        topic_id = store.topics.get("anatomy").id
        solo_id = store.identities.get("solo").id
        held: list[Any] = [None]
        params = {
            "sender": "solo",
            "topic": "anatomy",
            "subject": SUBJECT,
            "body": BODY_1K,
            "priority": "normal",
            "attachments": None,
            "metadata": None,
            "idempotency_key": None,
            "request_hash": "h",
            "delay": None,
        }
        pieces: dict[str, Any] = {
            "pgmq.send": lambda: pq.execute(
                "SELECT pgmq.send(%s, %s::jsonb)", (TOPIC, msg), prepare=True
            ).fetchone(),
            "store.mail.publish": lambda: store.mail.publish("solo", "anatomy", SUBJECT, BODY_1K),
            "publish_mail raw (insert, commit)": lambda: held.__setitem__(
                0,
                raw.execute(pub_sql, {**params, "new_thread_id": "t"}, prepare=True).fetchone(),
            ),
            "sequence_mail raw (offset taken)": lambda: raw.execute(
                seq_sql, {"topic_id": topic_id, "mail_ids": [held[0][0]]}, prepare=True
            ).fetchall(),
            "INSERT INTO mail, bare (1 KB body)": lambda: raw.execute(
                "INSERT INTO mail (thread_id, sender_id, subject, body, priority, metadata)"
                " VALUES ('t', %s, %s, %s, 'normal', 'null')",
                (solo_id, SUBJECT, BODY_1K),
                prepare=True,
            ),
            "to_tsvector(1 KB body)": lambda: raw.execute(
                "SELECT setweight(to_tsvector('english', %s), 'B')", (BODY_1K,), prepare=True
            ).fetchone(),
            "SELECT 1": lambda: raw.execute("SELECT 1", prepare=True).fetchone(),
        }
        batch: dict[str, Any] = {
            "pgmq.send_batch": lambda: pq.execute(
                "SELECT * FROM pgmq.send_batch(%s, %s::jsonb[])", (TOPIC, [msg] * BATCH)
            ).fetchall(),
            "store.mail.publish_many": lambda: store.mail.publish_many(
                "solo", "anatomy", [BODY_1K] * BATCH, subject=SUBJECT
            ),
            "INSERT INTO mail … SELECT, bare": lambda: raw.execute(
                "INSERT INTO mail (thread_id, sender_id, subject, body, priority, metadata)"
                " SELECT 't', %s, %s, %s, 'normal', 'null' FROM generate_series(1, %s)",
                (solo_id, SUBJECT, BODY_1K, BATCH),
            ),
            "to_tsvector(1 KB body) x batch": lambda: raw.execute(
                "SELECT count(setweight(to_tsvector('english', %s || g), 'B'))"
                " FROM generate_series(1, %s) AS g",
                (BODY_1K, BATCH),
            ).fetchone(),
        }
        for _ in range(rounds):
            for name, call in pieces.items():
                t0 = time.perf_counter()
                call()
                times.setdefault(name, []).append(time.perf_counter() - t0)
        for _ in range(max(5, rounds // 20)):
            for name, call in batch.items():
                t0 = time.perf_counter()
                call()
                times.setdefault(name, []).append((time.perf_counter() - t0) / BATCH)
    p50 = {k: statistics.median(v[len(v) // 5 :]) for k, v in times.items()}
    print(f"  anatomy of one publish, 1 connection, p50 of {rounds} interleaved calls:")
    for name in pieces:
        t = p50[name]
        print(f"    {name:<34} {t * 1e6:8,.0f} µs  ({t / p50['pgmq.send']:.2f}x pgmq.send)")
    print(f"  and of a batch of {BATCH}, per message:")
    for name in batch:
        t = p50[name]
        print(f"    {name:<34} {t * 1e6:8,.0f} µs  ({t / p50['pgmq.send_batch']:.2f}x pgmq)")


def ratio_rows(label: str, ours: Side, peer: Side, bad: str | None) -> list[Row]:
    """The measure's row (throughput ratio, the goal) and, when the backends' CPU could be
    read, an info row: CPU per message, client and backends, pgmq's / ours. CPU does not
    depend on what else the machine runs (throughput, measured one side after the other,
    does)."""
    r = ours.rate / peer.rate
    print(
        f"  {label}: ours {ours.rate:,.0f} msg/s (p50 {ours.p50 * 1e3:.2f} ms), pgmq "
        f"{peer.rate:,.0f} msg/s (p50 {peer.p50 * 1e3:.2f} ms): {r:.2f}x"
        + (f"  CHECK FAILED: {bad}" if bad else "")
    )
    print(
        f"    per message: commits ours {ours.commits:.2f} pgmq {peer.commits:.2f}; WAL ours "
        f"{ours.wal:,.0f} B pgmq {peer.wal:,.0f} B; client CPU ours {ours.cpu * 1e6:,.0f} µs "
        f"pgmq {peer.cpu * 1e6:,.0f} µs"
        + (
            f"; the workers' backends' CPU ours {ours.server * 1e6:,.0f} µs pgmq "
            f"{peer.server * 1e6:,.0f} µs"
            if ours.server is not None and peer.server is not None
            else ""
        )
    )
    rows = [
        Row(
            f"{label} (ours/pgmq msg/s; p50 ours/pgmq)",
            f"{r:.2f}x ({ours.rate:,.0f} vs {peer.rate:,.0f}; {ours.p50 * 1e3:.2f} vs "
            f"{peer.p50 * 1e3:.2f} ms)",
            ">= 1.0x",
            r >= 1.0,
        )
    ]
    if ours.server is not None and peer.server is not None:
        mine, theirs = ours.cpu + ours.server, peer.cpu + peer.server
        rows.append(
            Row(
                f"{label}: CPU per message, client + backends (pgmq/ours)",
                f"{theirs / mine:.2f}x ({theirs * 1e6:,.0f} vs {mine * 1e6:,.0f} µs)",
                "info",
                None,
            )
        )
    return rows


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--messages", type=int, default=1200, help="messages per measure")
    parser.add_argument("--quick", action="store_true", help="a smoke run (400 messages)")
    args = parser.parse_args()
    n = 400 if args.quick else args.messages
    started = time.perf_counter()
    url = server_url(args.database)
    environment(url)
    print(f"  pgmq        : {PGMQ_VERSION} (SQL install script, {PGMQ_SQL.name})")
    scratch = Scratch(url, "pgmq")
    rows: list[Row] = []
    try:
        ours = scratch.create("ours")
        peer = pgmq_database(scratch)
        with psycopg.connect(ours, autocommit=True) as conn:
            db = conn.execute("SELECT current_database()").fetchone()
            assert db is not None
            conn.execute(f"ALTER DATABASE \"{db[0]}\" SET track_functions = 'pl'")
        pgmq_queue(peer)
        anatomy(ours, peer, 60 if args.quick else 300)
        first_ours = True
        rates: dict[str, float] = {}
        for label, job, workers in (
            ("send x4", "send", 4),
            ("send x16", "send", 16),
            ("send x4, not waiting for offsets", "send_lazy", 4),
            ("send x16, not waiting for offsets", "send_lazy", 16),
            ("send x4, unsearchable topic", "send_unsearchable", 4),
            ("send x16, unsearchable topic", "send_unsearchable", 16),
            ("send x4, unsearchable, not waiting", "send_lazy_unsearchable", 4),
            ("send x16, unsearchable, not waiting", "send_lazy_unsearchable", 16),
            (
                "send x4, unsearchable, not waiting, a claim waiting",
                "send_lazy_unsearchable_listened",
                4,
            ),
            (
                "send x16, unsearchable, not waiting, a claim waiting",
                "send_lazy_unsearchable_listened",
                16,
            ),
            ("send_batch x4", "batch", 4),
            ("send_batch x4, unsearchable topic", "batch_unsearchable", 4),
        ):
            listened = job.endswith("_listened")
            job = job.removesuffix("_listened")
            names = [f"p{i}" for i in range(workers)]
            each = n // workers
            counts = [each // BATCH * BATCH if job.startswith("batch") else each] * workers
            total = sum(counts)
            sides: dict[str, Side] = {}
            bad: str | None = None
            for side in ("ours", "pgmq") if first_ours else ("pgmq", "ours"):
                if side == "ours":
                    topic = f"send{len(rows)}"
                    ours_topic(
                        ours,
                        names,
                        topic,
                        searchable=not job.endswith("unsearchable"),
                        listened=listened,
                    )
                    s0 = sequencer_stats(ours)
                    with ik.Store(ours, pool_size=1) as store:
                        follower = LogFollower(store, topic)
                        sides[side], results = measure(
                            f"ours_{job}", ours, names, counts, topic, follower
                        )
                        bad = bad or check_ours_send(ours, topic, results, follower)
                    time.sleep(1.0)
                    s1 = sequencer_stats(ours)
                    calls = s1[0] - s0[0]
                    if calls:
                        print(
                            f"    sequencer: {calls} calls for {total} messages, "
                            f"{(s1[1] - s0[1]) / calls * 1e3:,.0f} µs per call; the "
                            f"follower read the log {follower.reads} times during the run"
                        )
                else:
                    pgmq_queue(peer)
                    peer_job = "pgmq_send" if job.startswith("send") else "pgmq_batch"
                    sides[side], results = measure(peer_job, peer, names, counts, TOPIC)
                    bad = bad or check_pgmq_send(peer, total, results)
            first_ours = not first_ours
            if job == "send":  # the mechanism alone: ours raw vs serialised writers raw
                raw: dict[str, Side] = {}
                for kind in ("raw", "serial"):
                    topic = f"{kind}{len(rows)}"
                    ours_topic(ours, names, topic)
                    with ik.Store(ours, pool_size=1) as store:
                        follower = LogFollower(store, topic)
                        raw[kind], results = measure(
                            f"{kind}_send", ours, names, counts, topic, follower
                        )
                        bad = bad or check_ours_send(ours, topic, results, follower)
                mech = raw["raw"].rate / raw["serial"].rate
                print(
                    f"    raw, no library around: our statements {raw['raw'].rate:,.0f} msg/s "
                    f"(p50 {raw['raw'].p50 * 1e3:.2f} ms), serialised writers (0027's) "
                    f"{raw['serial'].rate:,.0f} msg/s (p50 {raw['serial'].p50 * 1e3:.2f} ms): "
                    f"{mech:.2f}x; vs pgmq {raw['raw'].rate / sides['pgmq'].rate:.2f}x and "
                    f"{raw['serial'].rate / sides['pgmq'].rate:.2f}x"
                )
                rows.append(
                    Row(
                        f"{label}: our statements raw / serialised writers raw (0027's way)",
                        f"{mech:.2f}x ({raw['raw'].rate:,.0f} vs {raw['serial'].rate:,.0f} msg/s)",
                        "info",
                        None,
                    )
                )
            rows.extend(ratio_rows(label, sides["ours"], sides["pgmq"], bad))
            rates[label] = sides["ours"].rate
            if listened:
                quiet = rates[f"send x{workers}, unsearchable, not waiting"]
                rows.append(
                    Row(
                        f"send x{workers}, unsearchable, not waiting: nobody waiting on the "
                        "topic / a claim waiting (each publish sends its wake-up)",
                        f"{quiet / sides['ours'].rate:.2f}x",
                        "info",
                        None,
                    )
                )
            rows.append(
                Row(
                    f"{label}: offsets gapless, in order (checked)",
                    bad if bad else "ok",
                    "ok",
                    bad is None,
                    check=True,
                )
            )
        for workers in (4, 16):
            names = [f"w{i}" for i in range(workers)]
            sides = {}
            bad = None
            for side in ("ours", "delete", "archive"):
                if side == "ours":
                    topic = f"drain{workers}"
                    ours_topic(ours, names, topic, fill=n)
                    sides[side], results = measure("ours_drain", ours, names, [0] * workers, topic)
                    bad = bad or check_ours_drain(ours, topic, n, results)
                else:
                    pgmq_queue(peer, fill=n)
                    sides[side], results = measure(
                        f"pgmq_drain_{side}", peer, names, [0] * workers, TOPIC
                    )
                    bad = bad or check_pgmq_drain(peer, n, results, side == "archive")
            rows.extend(
                ratio_rows(f"drain x{workers} vs read+delete", sides["ours"], sides["delete"], bad)
            )
            rows.extend(
                ratio_rows(
                    f"drain x{workers} vs read+archive", sides["ours"], sides["archive"], bad
                )
            )
            rows.append(
                Row(
                    f"drain x{workers}: exactly once (checked)",
                    bad if bad else "ok",
                    "ok",
                    bad is None,
                    check=True,
                )
            )
    finally:
        scratch.drop_all()
    return summary(rows, started)


if __name__ == "__main__":
    run(main)
