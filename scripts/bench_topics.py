"""Benchmark report: topics and work queues (issue 9) against baselines measured in the same run.

Usage: ``python scripts/bench_topics.py [--database URL] [--messages N] [--quick] [--drain-only]
[--drain-messages N]``
(with no URL: ``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server; set
``IKIGAI_DATA_DIR`` to run the embedded server on a private data directory).

Four measurements (``--drain-only``: only the fourth):

1. Queue throughput: 8 consumer processes (multiprocessing, spawn), each its own store and
   identity, looping ``store.topics.claim`` + ``store.topics.complete`` on one queue topic
   pre-filled with N messages (20,000 by default) until a claim finds nothing, vs the minimal
   queue a raw baseline runs on the same server (pgmq's design): 8 processes, each an autocommit
   psycopg connection looping ``DELETE FROM q WHERE id = (SELECT id FROM q ORDER BY id FOR
   UPDATE SKIP LOCKED LIMIT 1) RETURNING *`` over N rows of a plain table (id, enqueued_at,
   subject, body). Every run has a fresh scratch database (dropped after it), so each starts
   from the same tables. Both queues are filled in bulk (``INSERT ... SELECT generate_series``;
   the topic's mail and queue rows as ``publish`` writes them, offsets 1..N), then ``VACUUM
   ANALYZE``d; each consumer warms up (20 claims on a warm-up queue) before all start together.
   Throughput: N / (last finish - first start). A third consumer loop takes the same messages in
   one round trip each: ``held = claim(..., complete=held)`` (the claim completes the previous
   one in its own statement). Runs rotate their order (store, loop, raw; loop, raw, store; ...).
   Goal: >= 0.5x raw. Checked after every run: every queue row of the topic is ``done`` after
   exactly one attempt, N of them, and the ids the consumers got are N distinct ids, exactly the
   topic's (raw: the table is empty, the ids are 1..N once each). Where the time goes: what the
   consumers' backends wait on (``pg_stat_activity``, sampled every 10 ms); per message, the
   consumers' CPU (``time.process_time``), their backends' CPU (``/proc/<pid>/stat``, "n/a" on a
   remote server) and the WAL written (``pg_current_wal_lsn`` delta); the round trips of one
   claim + complete vs one DELETE (libpq trace, as in 3); and the EXPLAIN ANALYZE of the claim
   statement on a fresh N-message queue and on one whose first half is done (its queue_items
   scans). For information: 1 consumer vs 1 raw consumer on N/4 messages, and pgmq's own figure
   (~30k msg/s on 16 vCPU) next to this machine's core count (``nproc``).
2. ``store.mail.publish`` to a broadcast topic with 8 subscribers vs ``store.mail.send`` to one
   recipient (and, for information, publish to a queue topic): per-call mean, p50 and p90 in
   microseconds, calls alternating (rounds of 100, first side rotating). Goal: ratio of p50s
   <= 2.
3. ``store.topics.poll`` of an identity subscribed to 20 broadcast topics, each with 5 new mails
   past its stored offset (and those 5 unread in its inbox), vs one subscribed to 1 such topic;
   and, to isolate the cost of subscriptions, one subscribed to the same 20 topics of which only
   one has news. Calls alternate one by one. The ratio of p50s is reported (it grows with the
   rows returned: 200 vs 10). One round trip is proved on the wire: libpq's protocol trace
   (``PQtrace``, psycopg's ``pgconn.trace``) is switched on for the store's only pooled
   connection (``pool_size=1``) around single ``poll`` calls, and the client/server messages of
   the call are counted: round trips = ``ReadyForQuery`` messages (one per ``Sync`` or simple
   ``Query``), statements = ``Execute`` + ``Query`` messages. This sees every byte the call
   sends, including any BEGIN/COMMIT or pool check, which counting ``Cursor.execute`` calls or
   server statistics (flushed lazily; ``pg_stat_statements`` is not loaded on the embedded
   server) would not show as directly. Goal: 1 round trip and 1 statement per poll (a
   correctness check, as the README promises it).
4. Issue 22's worker loop: 4 worker processes drain a queue of 2,000 messages
   (``--drain-messages``) with ``held = claim(..., complete=held)`` (one round trip per
   message) vs 4 draining a leased table the way a competent user writes one (pgmq's shape:
   ``q(id bigserial primary key, vt timestamptz, payload jsonb)``, an index on ``vt``) in two
   round trips per message: ``UPDATE q SET vt = now() + interval '30 seconds' WHERE id =
   (SELECT id FROM q WHERE vt <= now() ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING
   *`` then ``DELETE FROM q WHERE id = %s`` (both prepared). Fresh scratch database per run,
   filled in bulk, ``VACUUM ANALYZE``d; 5 runs each (2 with ``--quick``), the side going first
   alternating. Goal: >= 0.9x (median msg/s). Checked after every run: ours as in 1; the
   table is empty, the ids the workers got are 1..N once each, and every DELETE deleted the
   row its worker leased. Reported: per-pair ratios (their spread is the noise), and per
   message the workers' and their backends' CPU and the WAL, as in 1. And the schema's floor
   (a report): the baseline's two statements written on our own tables, by 4 raw workers
   (the claim an ``UPDATE`` of ``queue_items`` leasing the topic's oldest open row with a new
   token and returning the mail's subject and body, then an ``UPDATE`` to done with that
   token), checked like ours: how far the tables' constraints, indexes and triggers alone
   are from the leased table, and how far ``claim`` is from them.

Invariants: nothing is asserted on timings (a report: the exit status is non-zero only on errors
or a failed correctness check: exactly-once completion, one round trip per poll); sides alternate
after warm-up so load from other processes on this machine hits both alike. All data lives in
scratch databases ``ikigai_bench_<pid>_topics_<role>`` on the server of the URL, dropped at the
end, even on failure. A markdown table (measure, result, goal, met?) ends the report.
``--quick``: a smoke run of about 20 s (2,000 messages, one run each, fewer rounds); the default
run takes about 3-4 minutes on 2 cores.
"""

from __future__ import annotations

import collections
import multiprocessing as mp
import os
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from benchkit import (
    BODY,
    SUBJECT,
    Row,
    Scratch,
    arguments,
    describe_waits,
    environment,
    interleaved,
    ms,
    nproc,
    pct,
    register,
    run,
    server_url,
    step,
    summary,
    us,
    what_backends_do,
)
from psycopg import pq

import ikigai_store as ik

PGMQ_MSGS_PER_S = 30_000
PGMQ_VCPUS = 16
LEASE = 300.0  # no lease runs out during a run: every message is claimed once
WARMUP_CLAIMS = 20
CONSUMERS = 8
#: Queue consumers: claim then complete (two round trips per message), claim completing the
#: previous claim (``claim(..., complete=held)``: one round trip), and the raw DELETE.
MODES = {
    "store": "claim + complete",
    "loop": "claim(complete=previous)",
    "raw": "raw DELETE",
}
#: Section 4: the issue's worker loop vs a plain leased queue, 4 worker processes each.
DRAIN_WORKERS = 4
DRAIN_MESSAGES = 2_000
DRAIN_MODES = {
    "loop": "claim(complete=held)",
    "leased": "leased UPDATE + DELETE",
    "floor": "leased UPDATE + UPDATE on queue_items",
}
POLL_TOPICS = 20
POLL_NEW = 5  # new mails per topic past the stored offset
POLL_OLD = 5  # mails per topic already committed (and read)


# ------------------------------------------------------------------------------------ report


# ------------------------------------------------------------------------------------ timing


# ------------------------------------------------------------------------------------ wire


@dataclass
class Wire:
    """What one call put on the wire: round trips (ReadyForQuery), statements (Execute +
    Query), and the frontend messages by type."""

    round_trips: int
    statements: int
    sent: collections.Counter[str]

    def describe(self) -> str:
        sent = ", ".join(f"{k} {v}" for k, v in sorted(self.sent.items()))
        return f"{self.round_trips} round trip(s), {self.statements} statement(s) [sent: {sent}]"


def on_the_wire(store: ik.Store, call: Callable[[], object]) -> Wire:
    """Run ``call`` with libpq's protocol trace on the store's only pooled connection (the store
    must have ``pool_size=1``) and count the messages it exchanged."""
    with tempfile.TemporaryFile() as f:
        with store._connection() as conn:
            traced = conn.pgconn
            traced.trace(f.fileno())
            traced.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            call()
        finally:
            with store._connection() as conn:
                same = conn.pgconn is traced
                traced.untrace()  # flushes the trace stream
        if not same:
            raise RuntimeError("setup error: the store has more than one pooled connection")
        f.seek(0)
        lines = f.read().decode("utf-8", "replace").splitlines()
    sent: collections.Counter[str] = collections.Counter()
    round_trips = 0
    for line in lines:
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        direction, kind = parts[0], parts[2].strip()
        if direction == "F":
            sent[kind] += 1
        elif direction == "B" and kind == "ReadyForQuery":
            round_trips += 1
    return Wire(round_trips, sent["Execute"] + sent["Query"], sent)


# ------------------------------------------------------------------------------------ 1 queue


def raw_delete(table: str) -> str:
    return (
        f"DELETE FROM {table} WHERE id = (SELECT id FROM {table} ORDER BY id "
        "FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING *"
    )


def leased_claim(table: str) -> str:
    """The baseline's claim: lease the oldest visible row for 30 s (the row stays; a worker
    that dies loses it when ``vt`` passes), as pgmq's ``read`` does."""
    return (
        f"UPDATE {table} SET vt = now() + interval '30 seconds' WHERE id = (SELECT id FROM "
        f"{table} WHERE vt <= now() ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *"
    )


def leased_delete(table: str) -> str:
    """The baseline's completion: delete the leased row by id (pgmq's ``delete``)."""
    return f"DELETE FROM {table} WHERE id = %s"


#: The baseline's claim written on our own tables (the schema's floor: queue_items with its
#: constraints, indexes and triggers, the payload read from mail): lease the topic's oldest
#: open row, as ``claim`` does, with a new token, returning the mail's payload.
FLOOR_CLAIM = (
    "UPDATE queue_items AS q SET state = 'claimed', attempts = q.attempts + 1, "
    "holder_id = %(holder)s, token = gen_random_uuid(), "
    "lease_until = now() + interval '30 seconds', updated_at = now() "
    "FROM mail AS m WHERE q.mail_id = (SELECT mail_id FROM queue_items "
    "WHERE topic_id = %(topic)s AND outcome IS NULL "
    "AND (state = 'available' OR lease_until <= now()) "
    "ORDER BY topic_id, mail_id LIMIT 1 FOR UPDATE SKIP LOCKED) AND m.id = q.mail_id "
    "RETURNING q.mail_id, CAST(q.token AS text), m.subject, m.body"
)

#: The baseline's completion on queue_items: done, only with the claim's token.
FLOOR_DONE = (
    "UPDATE queue_items SET state = 'done', token = NULL, lease_until = NULL, "
    "updated_at = now() WHERE mail_id = %s AND token = CAST(%s AS uuid)"
)


def backend_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) a server backend on this machine has used; None when its
    /proc entry cannot be read (a remote server)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def consumer_process(
    url: str, mode: str, name: str, target: str, warm: str, go: Any, results: Any
) -> None:
    """Consume ``target`` until empty once ``go`` is set (``mode`` "store": claim + complete,
    "loop": claim(complete=previous), as identity ``name`` on queue topic ``target``; "raw":
    the DELETE on table ``target``; "leased": the leased UPDATE then the DELETE by id;
    "floor": the leased UPDATE then an UPDATE to done, on queue topic ``target``'s rows), after
    warming up on ``warm``; report (t0, t1, ids, client CPU s, its backend's CPU s, and for
    "leased" and "floor" the completions that did not complete exactly one row)."""
    try:
        ids: list[int] = []
        misses = 0
        if mode == "floor":
            with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
                found = conn.execute(
                    "SELECT (SELECT id FROM identities WHERE name = %s), (SELECT id FROM "
                    "topics WHERE name = %s), (SELECT id FROM topics WHERE name = %s)",
                    (name, warm, target),
                ).fetchone()
                assert found is not None
                holder, warm_id, target_id = found
                for _ in range(WARMUP_CLAIMS):
                    got = conn.execute(FLOOR_CLAIM, {"holder": holder, "topic": warm_id}).fetchone()
                    if got is None:
                        break
                    conn.execute(FLOOR_DONE, (got[0], got[1]))
                pid = conn.info.backend_pid
                results.put(("ready", name))
                if not go.wait(120):
                    raise RuntimeError("never started")
                t0, c0, s0 = time.monotonic(), time.process_time(), backend_cpu(pid)
                params = {"holder": holder, "topic": target_id}
                while (row := conn.execute(FLOOR_CLAIM, params).fetchone()) is not None:
                    if conn.execute(FLOOR_DONE, (row[0], row[1])).rowcount != 1:
                        misses += 1
                    ids.append(int(row[0]))
                t1, c1, s1 = time.monotonic(), time.process_time(), backend_cpu(pid)
        elif mode == "leased":
            # prepare_threshold=0: its two statements are prepared from their first use.
            with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
                lease, delete = leased_claim(warm), leased_delete(warm)
                for _ in range(WARMUP_CLAIMS):
                    if (row := conn.execute(lease).fetchone()) is None:
                        break
                    conn.execute(delete, (row[0],))
                lease, delete = leased_claim(target), leased_delete(target)
                pid = conn.info.backend_pid
                results.put(("ready", name))
                if not go.wait(120):
                    raise RuntimeError("never started")
                t0, c0, s0 = time.monotonic(), time.process_time(), backend_cpu(pid)
                while (row := conn.execute(lease).fetchone()) is not None:
                    if conn.execute(delete, (row[0],)).rowcount != 1:
                        misses += 1
                    ids.append(int(row[0]))
                t1, c1, s1 = time.monotonic(), time.process_time(), backend_cpu(pid)
        elif mode != "raw":
            with ik.Store(url, pool_size=1) as store:
                for _ in range(WARMUP_CLAIMS):  # connection, prepared statements, caches
                    held = store.topics.claim(name, warm, ttl=LEASE)
                    if held is None:
                        break
                    store.topics.complete(held)
                with store._connection() as conn:  # the only pooled connection
                    pid = conn.info.backend_pid
                results.put(("ready", name))
                if not go.wait(120):
                    raise RuntimeError("never started")
                t0, c0, s0 = time.monotonic(), time.process_time(), backend_cpu(pid)
                if mode == "store":
                    while (held := store.topics.claim(name, target, ttl=LEASE)) is not None:
                        store.topics.complete(held)
                        ids.append(held.mail.id)
                else:  # "loop": each claim completes the previous one (one round trip)
                    held = store.topics.claim(name, target, ttl=LEASE)
                    while held is not None:
                        ids.append(held.mail.id)
                        held = store.topics.claim(name, target, ttl=LEASE, complete=held)
                t1, c1, s1 = time.monotonic(), time.process_time(), backend_cpu(pid)
        else:
            with psycopg.connect(url, autocommit=True) as conn:
                warm_sql, sql = raw_delete(warm), raw_delete(target)
                for _ in range(WARMUP_CLAIMS):
                    if conn.execute(warm_sql).fetchone() is None:
                        break
                pid = conn.info.backend_pid
                results.put(("ready", name))
                if not go.wait(120):
                    raise RuntimeError("never started")
                t0, c0, s0 = time.monotonic(), time.process_time(), backend_cpu(pid)
                while (row := conn.execute(sql).fetchone()) is not None:
                    ids.append(int(row[0]))
                t1, c1, s1 = time.monotonic(), time.process_time(), backend_cpu(pid)
        server = None if s0 is None or s1 is None else s1 - s0
        results.put(("done", name, t0, t1, ids, c1 - c0, server, misses))
    except Exception as exc:  # reported to the parent, which fails the run
        results.put(("error", name, f"{type(exc).__name__}: {exc}"))


def fill_topic(url: str, topic: str, n: int) -> None:
    """``n`` messages on queue topic ``topic`` from ``producer``, as ``publish`` writes them
    (mail at the next offsets, one available queue row each, next_offset advanced)."""
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        got = conn.execute(
            "SELECT id, next_offset FROM topics WHERE name = %s AND kind = 'queue' FOR UPDATE",
            (topic,),
        ).fetchone()
        if got is None:
            raise RuntimeError(f"setup error: no queue topic {topic}")
        topic_id, first = got
        conn.execute(
            """
            WITH m AS (
                INSERT INTO mail (thread_id, sender_id, subject, body, topic_id, log_offset)
                SELECT gen_random_uuid()::text,
                       (SELECT id FROM identities WHERE name = 'producer'),
                       'job ' || g, %(body)s, %(topic_id)s, %(first)s + g - 1
                FROM generate_series(1, %(n)s) AS g
                ORDER BY g
                RETURNING id
            )
            INSERT INTO queue_items (mail_id, topic_id) SELECT id, %(topic_id)s FROM m
            """,
            {"body": BODY, "topic_id": topic_id, "first": first, "n": n},
        )
        conn.execute(
            "UPDATE topics SET next_offset = next_offset + %s WHERE id = %s", (n, topic_id)
        )


def fill_table(url: str, table: str, n: int) -> None:
    """A plain queue table (pgmq's shape, minus its visibility columns) holding ``n`` rows."""
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute(
            f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, "
            "enqueued_at TIMESTAMPTZ NOT NULL DEFAULT now(), subject TEXT NOT NULL, "
            "body TEXT NOT NULL)"
        )
        conn.execute(
            f"INSERT INTO {table} (id, subject, body) "
            "SELECT g, 'job ' || g, %s FROM generate_series(1, %s) AS g",
            (BODY, n),
        )


def fill_leased(url: str, table: str, n: int) -> None:
    """A leased queue table holding ``n`` visible rows, as a competent user would make it
    (pgmq's shape: the id is the order, ``vt`` the end of the current lease, the payload
    jsonb), with pgmq's index on ``vt`` beside the primary key."""
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute(
            f"CREATE TABLE {table} (id BIGSERIAL PRIMARY KEY, "
            "vt TIMESTAMPTZ NOT NULL DEFAULT now(), payload JSONB NOT NULL)"
        )
        conn.execute(f"CREATE INDEX ON {table} (vt)")
        conn.execute(
            f"INSERT INTO {table} (payload) SELECT jsonb_build_object('subject', 'job ' || g, "
            "'body', CAST(%s AS text)) FROM generate_series(1, %s) AS g ORDER BY g",
            (BODY, n),
        )


@dataclass
class QueueRun:
    rate: float
    checks: dict[str, bool]
    waits: collections.Counter[str]
    cost: str
    client_cpu: float
    server_cpu: float | None
    wal: float


def queue_run(
    scratch: Scratch, mode: str, consumers: int, n: int, tag: str, *, sample: bool = True
) -> QueueRun:
    """In a fresh scratch database (so every run starts from the same tables), fill a queue
    (topic or table) with ``n`` messages, consume it with ``consumers`` spawned processes, then
    check every message was taken once; the database is dropped afterwards."""
    url = scratch.create(tag)
    try:
        return consume(url, mode, consumers, n, tag, sample)
    finally:
        scratch.drop(tag)


def consume(url: str, mode: str, consumers: int, n: int, tag: str, sample: bool) -> QueueRun:
    names = [f"w{i}" for i in range(consumers)]
    register(url, "producer", *names)
    tables = mode in ("raw", "leased")
    target, warm = (tag, f"warm_{tag}") if tables else (f"jobs-{tag}", f"warm-{tag}")
    if mode == "leased":
        fill_leased(url, target, n)
        fill_leased(url, warm, consumers * WARMUP_CLAIMS)
        vacuum: tuple[str, ...] = (target, warm)
    elif mode != "raw":
        with ik.Store(url, pool_size=1) as store:
            for topic in (target, warm):
                store.topics.create(topic, "queue")
                for w in names:
                    store.topics.subscribe(w, topic)
        fill_topic(url, target, n)
        fill_topic(url, warm, consumers * WARMUP_CLAIMS)
        with ik.Store(url, pool_size=1) as store:
            info = {t.topic.name: t for t in store.topics.list()}
        if (info[target].messages, info[target].last_offset) != (n, n):
            raise RuntimeError(f"setup error: topic {target} holds {info[target]}")
        vacuum = ("mail", "queue_items", "topics")
    else:
        fill_table(url, target, n)
        fill_table(url, warm, consumers * WARMUP_CLAIMS)
        vacuum = (target, warm)
    with psycopg.connect(url, autocommit=True) as conn:
        for t in vacuum:
            conn.execute(f"VACUUM (ANALYZE) {t}")

    ctx = mp.get_context("spawn")
    go, results = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=consumer_process, args=(url, mode, w, target, warm, go, results), daemon=True
        )
        for w in names
    ]
    for p in procs:
        p.start()
    done: list[tuple[Any, ...]] = []
    waits: collections.Counter[str] = collections.Counter()
    stop = threading.Event()
    sampler = threading.Thread(target=what_backends_do, args=(url, stop, waits), daemon=True)
    try:
        ready = 0
        while ready < len(procs):
            msg = results.get(timeout=180)
            if msg[0] == "error":
                raise RuntimeError(f"consumer {msg[1]} failed: {msg[2]}")
            ready += 1
        if sample:
            sampler.start()
        with psycopg.connect(url) as conn:
            lsn0 = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        go.set()
        while len(done) < len(procs):
            msg = results.get(timeout=900)
            if msg[0] == "error":
                raise RuntimeError(f"consumer {msg[1]} failed: {msg[2]}")
            done.append(msg)
    finally:
        stop.set()
        if sampler.is_alive():
            sampler.join(timeout=10)
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    start, end = min(m[2] for m in done), max(m[3] for m in done)
    with psycopg.connect(url) as conn:
        wal = conn.execute("SELECT pg_current_wal_lsn() - %s::pg_lsn", lsn0).fetchone()
    client_cpu = sum(m[5] for m in done) / n
    servers = [m[6] for m in done]
    server_cpu = None if None in servers else sum(servers) / n
    wal_per_msg = float(wal[0]) / n if wal else 0.0
    got = [i for m in done for i in m[4]]
    distinct = len(set(got)) == len(got)
    with psycopg.connect(url) as conn:
        if not tables:
            row = conn.execute(
                """
                SELECT count(*), count(*) FILTER (WHERE state = 'done'),
                       count(*) FILTER (WHERE attempts = 1), array_agg(mail_id)
                FROM queue_items WHERE topic_id = (SELECT id FROM topics WHERE name = %s)
                """,
                (target,),
            ).fetchone()
            assert row is not None
            rows, finished, once, stored = row
            checks = {
                f"{n} queue rows": rows == n,
                "all done": finished == n,
                "one attempt each": once == n,
                "consumers' ids distinct": distinct,
                "consumers' ids = the topic's": sorted(got) == sorted(stored or []),
            }
            if mode == "floor":
                checks["every UPDATE to done completed its claim"] = sum(m[7] for m in done) == 0
        else:
            left = conn.execute(f"SELECT count(*) FROM {target}").fetchone()
            checks = {
                "table empty": left == (0,),
                "consumers' ids distinct": distinct,
                "consumers' ids = 1..N": sorted(got) == list(range(1, n + 1)),
            }
            if mode == "leased":
                checks["every DELETE deleted its leased row"] = sum(m[7] for m in done) == 0
    per = sorted(len(m[4]) for m in done)
    server = "n/a" if server_cpu is None else us(server_cpu)
    cost = (
        f"{per[0]:,}..{per[-1]:,} per consumer; per message: consumer CPU {us(client_cpu)}, "
        f"backend CPU {server}, WAL {wal_per_msg:,.0f} B"
    )
    return QueueRun(n / (end - start), checks, waits, cost, client_cpu, server_cpu, wal_per_msg)


_PLAN_KEEP = re.compile(r"^\s*CTE |Scan.* on queue_items|Rows Removed|Execution Time")


def claim_plan(url: str) -> list[str]:
    """The library's claim statement under EXPLAIN ANALYZE (rolled back), the lines that say
    how it reaches queue_items: its CTEs, their queue_items scans, rows filtered, total time."""
    params = {
        "identity": "probe",
        "topic": "jobs",
        "lease": LEASE,
        "done_id": None,
        "done_token": None,
    }
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(3):  # the last of three: warm caches
            with conn.transaction(force_rollback=True):
                plan = conn.execute(
                    "EXPLAIN (ANALYZE, COSTS OFF) " + ik.queries.claim_queue_item.sql, params
                ).fetchall()
    return [line for (line,) in plan if _PLAN_KEEP.search(line)]


@dataclass
class Anatomy:
    ours: Wire
    raw: Wire
    plans: dict[str, list[str]]


def claim_anatomy(scratch: Scratch, n: int) -> Anatomy:
    """What one claim + complete and one raw DELETE put on the wire (warm, prepared); how the
    claim statement reads a queue of ``n`` messages, fresh and with the first half done."""
    url = scratch.create("anatomy")
    register(url, "producer", "probe")
    with ik.Store(url, pool_size=1) as store:
        store.topics.create("jobs", "queue")
        store.topics.subscribe("probe", "jobs")
    fill_topic(url, "jobs", n)
    fill_table(url, "wire_probe", 20)
    with psycopg.connect(url, autocommit=True) as conn:
        for rel in ("mail", "queue_items", "topics", "wire_probe"):
            conn.execute(f"VACUUM (ANALYZE) {rel}")
    with ik.Store(url, pool_size=1) as store:

        def claim_complete() -> None:
            held = store.topics.claim("probe", "jobs", ttl=LEASE)
            if held is None:
                raise RuntimeError("setup error: the probe queue is empty")
            store.topics.complete(held)

        sql = raw_delete("wire_probe")

        def delete() -> None:
            with store._connection() as conn:
                conn.execute(sql).fetchone()

        for _ in range(10):
            claim_complete()
            delete()
        ours, raw = on_the_wire(store, claim_complete), on_the_wire(store, delete)
    plans = {"fresh": claim_plan(url)}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE queue_items SET state = 'done' WHERE mail_id <= "
            "(SELECT min(mail_id) FROM queue_items) + %s",
            (n // 2,),
        )
        conn.execute("VACUUM (ANALYZE) queue_items")
    plans["half done"] = claim_plan(url)
    scratch.drop("anatomy")
    return Anatomy(ours, raw, plans)


def bench_queue(scratch: Scratch, n: int, rounds: int) -> list[Row]:
    print(
        f"\n[1] queue: {CONSUMERS} consumers claim + complete vs raw DELETE ... SKIP LOCKED, "
        f"{n:,} messages ({rounds} run(s) each, alternating)"
    )
    runs: dict[str, list[QueueRun]] = {mode: [] for mode in MODES}
    for r in range(rounds):
        order = list(MODES)[r % 3 :] + list(MODES)[: r % 3]  # the first side rotates
        for mode in order:
            with step(f"run {r + 1}: {CONSUMERS} x {MODES[mode]}"):
                run = queue_run(scratch, mode, CONSUMERS, n, f"q{CONSUMERS}_{mode}_{r}")
            runs[mode].append(run)
            bad = [what for what, ok in run.checks.items() if not ok]
            print(f"    {run.rate:,.0f} msg/s ({run.cost}); checks: {bad if bad else 'all passed'}")
    single_n = max(100, n // 4)
    single: dict[str, QueueRun] = {}
    for mode, label in MODES.items():
        with step(f"1 x {label}, {single_n:,} messages"):
            single[mode] = queue_run(scratch, mode, 1, single_n, f"q1_{mode}", sample=False)
        bad = [what for what, ok in single[mode].checks.items() if not ok]
        print(
            f"    {single[mode].rate:,.0f} msg/s ({single[mode].cost}); checks: "
            f"{bad if bad else 'all passed'}"
        )
    with step(f"anatomy: wire, and the claim statement on {n:,} messages"):
        anatomy = claim_anatomy(scratch, n)
    ours_wire, raw_wire = anatomy.ours, anatomy.raw
    print(f"  one claim + complete: {ours_wire.describe()}")
    print(f"  one raw DELETE      : {raw_wire.describe()}")
    for label, plan in anatomy.plans.items():
        print(f"  EXPLAIN ANALYZE claim_queue_item, {n:,} messages, {label} (queue_items lines):")
        for line in plan:
            print(f"    {line}")
    for mode, label in MODES.items():
        counts: collections.Counter[str] = sum((q.waits for q in runs[mode]), collections.Counter())
        print(f"  backends, sampled every 10 ms, {CONSUMERS} x {label}: {describe_waits(counts)}")
    rate = {mode: statistics.median(q.rate for q in runs[mode]) for mode in MODES}
    ours, loop, raw = rate["store"], rate["loop"], rate["raw"]
    ratio, loop_ratio = ours / raw, loop / raw
    s_ratio = single["store"].rate / single["raw"].rate
    s_loop = single["loop"].rate / single["raw"].rate
    print(
        f"  throughput ({CONSUMERS} consumers, medians): claim + complete {ours:,.0f} msg/s, "
        f"claim(complete=previous) {loop:,.0f} msg/s, raw {raw:,.0f} msg/s = {ratio:.2f}x / "
        f"{loop_ratio:.2f}x; 1 consumer: {single['store'].rate:,.0f} / "
        f"{single['loop'].rate:,.0f} vs {single['raw'].rate:,.0f} = {s_ratio:.2f}x / "
        f"{s_loop:.2f}x"
    )
    cost: dict[str, str] = {}
    for mode in MODES:
        qs = runs[mode]
        client = statistics.median(q.client_cpu for q in qs)
        servers = [q.server_cpu for q in qs if q.server_cpu is not None]
        server = us(statistics.median(servers)) if len(servers) == len(qs) else "n/a"
        wal = statistics.median(q.wal for q in qs)
        cost[mode] = f"{us(client)} + {server} CPU, {wal:,.0f} B WAL"
        print(
            f"  per message, {CONSUMERS} x {mode} (medians): consumer CPU {us(client)}, backend "
            f"CPU {server}, WAL {wal:,.0f} B"
        )
    print(
        f"  pgmq reports ~{PGMQ_MSGS_PER_S:,} msg/s on {PGMQ_VCPUS} vCPU; this machine: "
        f"nproc {nproc()} (server and consumers share it)"
    )
    all_runs = [q for mode in MODES for q in runs[mode]] + list(single.values())
    ok = all(all(q.checks.values()) for q in all_runs)
    failed = sorted({w for q in all_runs for w, v in q.checks.items() if not v})
    return [
        Row(
            f"queue throughput, {CONSUMERS} consumers, claim + complete vs raw DELETE ... "
            f"SKIP LOCKED, {n:,} msgs",
            f"{ours:,.0f} vs {raw:,.0f} msg/s = {ratio:.2f}x",
            "≥ 0.5x",
            ratio >= 0.5,
        ),
        Row(
            f"queue throughput, {CONSUMERS} consumers, claim(complete=previous) (one round "
            f"trip per message) vs raw DELETE, {n:,} msgs",
            f"{loop:,.0f} vs {raw:,.0f} msg/s = {loop_ratio:.2f}x",
            "≥ 0.5x",
            loop_ratio >= 0.5,
        ),
        Row(
            "queue: every message completed exactly once (store, loop and raw)",
            (
                f"{n:,} done, 1 attempt each, consumers' ids distinct and complete, in each of "
                f"{rounds} run(s) (and the 1-consumer runs)"
                if ok
                else "FAILED: " + "; ".join(failed)
            ),
            "exactly once",
            ok,
            check=True,
        ),
        Row(
            f"queue throughput, 1 consumer vs 1 raw, {single_n:,} msgs: claim + complete / "
            "claim(complete=previous)",
            f"{single['store'].rate:,.0f} / {single['loop'].rate:,.0f} vs "
            f"{single['raw'].rate:,.0f} msg/s = {s_ratio:.2f}x / {s_loop:.2f}x",
            "(report)",
            None,
        ),
        Row(
            f"per message, {CONSUMERS} consumers: consumer + backend CPU, WAL; claim + complete "
            "/ claim(complete=previous) vs raw",
            f"{cost['store']} / {cost['loop']} vs {cost['raw']}",
            "(report)",
            None,
        ),
        Row(
            "round trips per message: claim + complete vs DELETE",
            f"{ours_wire.round_trips} vs {raw_wire.round_trips}",
            "(report)",
            None,
        ),
        Row(
            "pgmq's published figure, for scale",
            f"~{PGMQ_MSGS_PER_S:,} msg/s on {PGMQ_VCPUS} vCPU; here nproc = {nproc()}",
            "(report)",
            None,
        ),
    ]


# ------------------------------------------------------------------------------------ 2 publish


def bench_publish(scratch: Scratch, rounds: int, per_round: int) -> list[Row]:
    print(
        f"\n[2] publish to a broadcast topic with {CONSUMERS} subscribers vs send to one recipient"
    )
    url = scratch.create("publish")
    subs = [f"sub{i}" for i in range(CONSUMERS)]
    register(url, "alice", "bob", *subs)
    with ik.Store(url, pool_size=1) as store:
        store.topics.create("news")
        for s in subs:
            store.topics.subscribe(s, "news")
        store.topics.create("work", "queue")
        first = store.mail.publish("alice", "news", SUBJECT, BODY)
        if first.to != tuple(subs) or first.log_offset != 1:
            raise RuntimeError(f"setup error: publish went to {first.to} at {first.log_offset}")

        def broadcast() -> None:
            store.mail.publish("alice", "news", SUBJECT, BODY)

        def send() -> None:
            store.mail.send("alice", ["bob"], SUBJECT, BODY)

        def queue() -> None:
            store.mail.publish("alice", "work", SUBJECT, BODY)

        sides = {"publish (8 subs)": broadcast, "send (1)": send, "publish (queue)": queue}
        with step(f"{rounds} rounds x {per_round} calls x {len(sides)} sides"):
            t = interleaved(sides, rounds=rounds, per_round=per_round, warmup=50)
        wires = {name: on_the_wire(store, fn) for name, fn in sides.items()}
    for side in t.calls:
        print(f"    {side:<16}: {t.line(side)}; {wires[side].describe()}")
    r = t.ratio("publish (8 subs)", "send (1)")
    q = t.ratio("publish (queue)", "send (1)")
    print(f"    publish (8 subs) / send (1): {r:.3f}x; publish (queue) / send (1): {q:.3f}x")
    return [
        Row(
            f"publish to a broadcast topic ({CONSUMERS} subscribers) vs send to 1 recipient, p50",
            f"{us(t.p50('publish (8 subs)'))} vs {us(t.p50('send (1)'))} = {r:.2f}x "
            f"(p90 {us(pct(t.calls['publish (8 subs)'], 0.9))} vs "
            f"{us(pct(t.calls['send (1)'], 0.9))})",
            "≤ 2x",
            r <= 2.0,
        ),
        Row(
            "publish to a queue topic vs send to 1 recipient, p50",
            f"{us(t.p50('publish (queue)'))} = {q:.2f}x",
            "(report)",
            None,
        ),
    ]


# ------------------------------------------------------------------------------------ 3 poll


def build_poll(url: str) -> None:
    """Topics t00..t19 with POLL_OLD + POLL_NEW mails each; ``reader20`` subscribed to all 20
    (stored offset POLL_OLD on each), ``quiet20`` to all 20 (POLL_OLD on t00, the end on the
    others), ``reader1`` to t00 (POLL_OLD). Each has read the inbox copies up to its offsets."""
    topics = [f"t{i:02d}" for i in range(POLL_TOPICS)]
    register(url, "publisher", "reader20", "quiet20", "reader1")
    with ik.Store(url, pool_size=1) as store:
        for t in topics:
            store.topics.create(t)
            for who in ("reader20", "quiet20"):
                store.topics.subscribe(who, t)
        store.topics.subscribe("reader1", topics[0])
        published: dict[str, list[ik.Mail]] = {t: [] for t in topics}
        for i in range(POLL_OLD + POLL_NEW):
            for t in topics:
                published[t].append(store.mail.publish("publisher", t, f"{t} #{i}", BODY))
        for who, subscribed in (
            ("reader20", topics),
            ("quiet20", topics),
            ("reader1", topics[:1]),
        ):
            for t in subscribed:
                upto = POLL_OLD if who != "quiet20" or t == topics[0] else POLL_OLD + POLL_NEW
                store.topics.commit(who, t, upto)
                for m in published[t][:upto]:
                    store.mail.read(who, m.id)


def bench_poll(scratch: Scratch, runs: int) -> list[Row]:
    print(f"\n[3] poll: subscribed to {POLL_TOPICS} topics with {POLL_NEW} new mails each vs to 1")
    url = scratch.create("poll")
    with step("build (publish, commit, read through the store)"):
        build_poll(url)
    with psycopg.connect(url, autocommit=True) as conn:
        for rel in ("mail", "mail_recipients", "subscriptions", "consumer_offsets", "topics"):
            conn.execute(f"VACUUM (ANALYZE) {rel}")
    expect = {
        "20 topics": (POLL_TOPICS * POLL_NEW, POLL_TOPICS, POLL_TOPICS * POLL_NEW),
        "20 topics, 1 with news": (POLL_NEW, POLL_TOPICS, POLL_NEW),
        "1 topic": (POLL_NEW, 1, POLL_NEW),
    }
    who = {"20 topics": "reader20", "20 topics, 1 with news": "quiet20", "1 topic": "reader1"}
    with ik.Store(url, pool_size=1) as store:
        for side, name in who.items():
            p = store.topics.poll(name)
            shape = (len(p.inbox), len(p.topics), sum(len(v) for v in p.topics.values()))
            if shape != expect[side] or any(
                m.log_offset is None or m.log_offset <= p.offsets[t]
                for t, ms_ in p.topics.items()
                for m in ms_
            ):
                raise RuntimeError(f"setup error: poll({name}) gave {shape}, not {expect[side]}")

        def poller(name: str) -> Callable[[], object]:
            return lambda: store.topics.poll(name)

        sides = {side: poller(name) for side, name in who.items()}
        with step(f"{runs} poll calls per side, alternating one by one"):
            t = interleaved(sides, rounds=runs, per_round=1, warmup=30)
        wires = {side: [on_the_wire(store, fn) for _ in range(3)] for side, fn in sides.items()}
    for side in t.calls:
        inbox, topics, news = expect[side]
        print(
            f"    {side:<23}: {t.line(side)}\n      returns {inbox} inbox + {news} topic mails "
            f"over {topics} topic(s); on the wire: {wires[side][-1].describe()}"
        )
    r = t.ratio("20 topics", "1 topic")
    rq = t.ratio("20 topics, 1 with news", "1 topic")
    print(f"    20 topics / 1 topic: {r:.2f}x; 20 topics with 1 with news / 1 topic: {rq:.2f}x")
    counts = {side: {(w.round_trips, w.statements) for w in ws} for side, ws in wires.items()}
    one = all(c == {(1, 1)} for c in counts.values())
    return [
        Row(
            f"poll, {POLL_TOPICS} topics x {POLL_NEW} new vs 1 topic x {POLL_NEW} new, p50",
            f"{ms(t.p50('20 topics'))} vs {ms(t.p50('1 topic'))} = {r:.2f}x (returns 200 vs 10 "
            "mails)",
            "(report)",
            None,
        ),
        Row(
            f"poll, {POLL_TOPICS} topics of which 1 has news vs 1 topic, p50",
            f"{ms(t.p50('20 topics, 1 with news'))} vs {ms(t.p50('1 topic'))} = {rq:.2f}x",
            "(report)",
            None,
        ),
        Row(
            "poll: round trips and statements per call (libpq trace), 20 topics / 1 topic",
            " / ".join(
                "; ".join(f"{rt} round trip, {st} statement" for rt, st in sorted(counts[s]))
                for s in ("20 topics", "1 topic")
            ),
            "1 round trip",
            one,
            check=True,
        ),
    ]


# ------------------------------------------------------------------------------------ 4 drain


def bench_drain(scratch: Scratch, n: int, rounds: int) -> list[Row]:
    """Issue 22's worker loop: ``DRAIN_WORKERS`` processes draining ``n`` messages with
    ``held = claim(..., complete=held)`` (one round trip per message) vs the same number
    draining a leased table (UPDATE ... SKIP LOCKED then DELETE: two round trips), alternating
    which side runs first; every run checked exactly-once."""
    w = DRAIN_WORKERS
    print(
        f"\n[4] queue drain: {w} workers, claim(complete=held) vs a leased queue (UPDATE vt ... "
        f"SKIP LOCKED, then DELETE), {n:,} messages ({rounds} run(s) each, alternating)"
    )
    runs: dict[str, list[QueueRun]] = {mode: [] for mode in DRAIN_MODES}
    for r in range(rounds):
        order = list(DRAIN_MODES) if r % 2 == 0 else list(reversed(DRAIN_MODES))
        for mode in order:
            with step(f"run {r + 1}: {w} x {DRAIN_MODES[mode]}"):
                run = queue_run(scratch, mode, w, n, f"d{w}_{mode}_{r}", sample=False)
            runs[mode].append(run)
            bad = [what for what, ok in run.checks.items() if not ok]
            print(f"    {run.rate:,.0f} msg/s ({run.cost}); checks: {bad if bad else 'all passed'}")
    rate = {mode: statistics.median(q.rate for q in runs[mode]) for mode in DRAIN_MODES}
    ratio = rate["loop"] / rate["leased"]
    pairs = sorted(a.rate / b.rate for a, b in zip(runs["loop"], runs["leased"], strict=True))
    spread = f"per-pair ratios {pairs[0]:.2f}..{pairs[-1]:.2f}" if len(pairs) > 1 else ""
    cost = {}
    for mode in DRAIN_MODES:
        qs = runs[mode]
        servers = [q.server_cpu for q in qs if q.server_cpu is not None]
        server = us(statistics.median(servers)) if len(servers) == len(qs) else "n/a"
        cost[mode] = (
            f"{us(statistics.median(q.client_cpu for q in qs))} + {server} CPU, "
            f"{statistics.median(q.wal for q in qs):,.0f} B WAL"
        )
        print(f"  per message, {w} x {DRAIN_MODES[mode]} (medians): {cost[mode]}")
    print(
        f"  throughput (medians): claim(complete=held) {rate['loop']:,.0f} msg/s, leased "
        f"{rate['leased']:,.0f} msg/s = {ratio:.2f}x {spread}"
    )
    floor = rate["floor"] / rate["leased"]
    print(
        f"  the leased queue's two statements on queue_items (the schema's floor): "
        f"{rate['floor']:,.0f} msg/s = {floor:.2f}x leased; claim(complete=held) = "
        f"{rate['loop'] / rate['floor']:.2f}x that floor"
    )
    all_runs = [q for mode in DRAIN_MODES for q in runs[mode]]
    ok = all(all(q.checks.values()) for q in all_runs)
    failed = sorted({c for q in all_runs for c, v in q.checks.items() if not v})
    return [
        Row(
            f"queue drain, {w} workers, claim(complete=held) vs two-statement leased SKIP "
            f"LOCKED queue, {n:,} msgs",
            f"{rate['loop']:,.0f} vs {rate['leased']:,.0f} msg/s = {ratio:.2f}x"
            + (f" ({spread})" if spread else ""),
            ">= 0.9x",
            ratio >= 0.9,
        ),
        Row(
            f"queue drain, {w} workers: per message consumer + backend CPU, WAL; "
            "claim(complete=held) vs leased",
            f"{cost['loop']} vs {cost['leased']}",
            "(report)",
            None,
        ),
        Row(
            f"queue drain, {w} workers: the leased queue's two statements on queue_items "
            "(the schema's floor) vs leased; claim(complete=held) vs that floor",
            f"{rate['floor']:,.0f} msg/s = {floor:.2f}x; {rate['loop'] / rate['floor']:.2f}x",
            "(report)",
            None,
        ),
        Row(
            "queue drain: every message completed exactly once (every side)",
            (
                f"{n:,} done once, ids distinct and complete, in each of {rounds} run(s)"
                if ok
                else "FAILED: " + "; ".join(failed)
            ),
            "exactly once",
            ok,
            check=True,
        ),
    ]


# ------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument(
        "--messages", type=int, metavar="N", help="queue messages per run (default 20,000)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 2,000 queue messages, one run each, fewer rounds",
    )
    parser.add_argument(
        "--drain-messages",
        type=int,
        metavar="N",
        default=DRAIN_MESSAGES,
        help=f"messages per run of section 4 (default {DRAIN_MESSAGES:,})",
    )
    parser.add_argument(
        "--drain-only",
        action="store_true",
        help="only section 4 (the 4-worker drain vs the leased queue)",
    )
    args = parser.parse_args(argv)
    quick: bool = args.quick
    n = args.messages or (2_000 if quick else 20_000)
    if n < 100:
        parser.error("--messages must be at least 100")
    if args.drain_messages < 100:
        parser.error("--drain-messages must be at least 100")

    t0 = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    scratch = Scratch(server, "topics")
    rows: list[Row] = []
    try:
        if not args.drain_only:
            rows += bench_queue(scratch, n, rounds=1 if quick else 2)
            rows += bench_publish(
                scratch, rounds=4 if quick else 20, per_round=50 if quick else 100
            )
            rows += bench_poll(scratch, runs=50 if quick else 300)
        rows += bench_drain(scratch, args.drain_messages, rounds=2 if quick else 5)
    finally:
        scratch.drop_all()
    return summary(rows, t0)


if __name__ == "__main__":
    run(main)
