"""Probe: how far a queue drain walks, ours against pgmq, at 4 and 16 workers (issue 38).

Usage: ``python scripts/probe_drain_walk.py [--database URL] [--messages N]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server).

Each side drains N messages of 1 KB with K worker processes, exactly once (checked): ours with
``held = store.topics.claim(..., complete=held)``, pgmq 1.5.1 (its SQL install script,
``scripts/vendor/pgmq/``) with ``read`` + ``delete``. Statistics are reset before the drain;
afterwards the script prints, per message, the index entries read and the heap tuples fetched
through each index of the queue's table (``pg_stat_user_indexes``), the heap and index blocks
read (``pg_statio_user_tables``) and the throughput. It answers one question of
docs/project/benchmarks.md ("Drain at 16 workers is borderline"): does our claim walk further
past held rows than pgmq's read? Nothing is asserted on the numbers.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from typing import Any

import psycopg
from bench_peers_pgmq import PGMQ_SQL
from benchkit import Scratch, arguments, server_url

import ikigai_store as ik

BODY = "x" * 1024
WORKERS = (4, 16)


def ours_worker(url: str, me: str, barrier: Any, out: Any) -> None:
    with ik.Store(url, pool_size=1) as store:
        store.topics.claim(me, "warm", ttl=30)
        barrier.wait()
        held, ids = None, []
        while (held := store.topics.claim(me, "q", ttl=30, complete=held)) is not None:
            ids.append(held.mail.id)
        out.put(ids)


def pgmq_worker(url: str, me: str, barrier: Any, out: Any) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT * FROM pgmq.read('warm', 30, 1)")
        barrier.wait()
        ids = []
        while True:
            got = conn.execute(
                "SELECT msg_id, read_ct, enqueued_at, vt, message FROM pgmq.read('q', 30, 1)",
                prepare=True,
            ).fetchone()
            if got is None:
                break
            conn.execute("SELECT pgmq.delete('q', %s::bigint)", (got[0],), prepare=True)
            ids.append(int(got[0]))
        out.put(ids)


def fill_ours(url: str, k: int, n: int) -> str:
    with ik.Store(url, pool_size=1) as store:
        store.identities.register("p")
        store.topics.create("q", "queue")
        store.topics.create("warm", "queue")
        for i in range(k):
            store.identities.register(f"w{i}")
            store.topics.subscribe(f"w{i}", "q")
            store.topics.subscribe(f"w{i}", "warm")
        for start in range(0, n, 500):
            store.mail.publish_many("p", "q", [BODY] * min(500, n - start), subject="s")
        store.mail.publish_many("p", "warm", [BODY] * k, subject="s")
    return "queue_items"


def fill_pgmq(url: str, k: int, n: int) -> str:
    message = json.dumps({"body": BODY})
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(PGMQ_SQL.read_text())  # type: ignore[arg-type]
        conn.execute("SELECT pgmq.create('q')")
        conn.execute("SELECT pgmq.create('warm')")
        for start in range(0, n, 1000):
            size = min(1000, n - start)
            conn.execute("SELECT pgmq.send_batch('q', %s::jsonb[])", ([message] * size,))
        conn.execute("SELECT pgmq.send_batch('warm', %s::jsonb[])", ([message] * k,))
    return "q_q"


def drain(side: str, url: str, k: int, n: int) -> None:
    table = (fill_ours if side == "ours" else fill_pgmq)(url, k, n)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("SELECT pg_stat_reset()")
    target = ours_worker if side == "ours" else pgmq_worker
    barrier, out = mp.Barrier(k), mp.Queue()
    procs = [mp.Process(target=target, args=(url, f"w{i}", barrier, out)) for i in range(k)]
    start = time.perf_counter()
    for p in procs:
        p.start()
    ids = [i for _ in procs for i in out.get()]
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    if len(ids) != n or len(set(ids)) != n:
        raise SystemExit(f"{side} x{k}: {len(ids)} drained, {len(set(ids))} distinct, of {n}")
    time.sleep(0.7)  # the statistics collector's flush
    with psycopg.connect(url, autocommit=True) as conn:
        indexes = conn.execute(
            "SELECT indexrelname, idx_tup_read, idx_tup_fetch FROM pg_stat_user_indexes "
            "WHERE relname = %s AND idx_scan > 0 ORDER BY indexrelname",
            (table,),
        ).fetchall()
        blocks = conn.execute(
            "SELECT heap_blks_hit + heap_blks_read, idx_blks_hit + idx_blks_read "
            "FROM pg_statio_user_tables WHERE relname = %s",
            (table,),
        ).fetchone()
    assert blocks is not None
    print(
        f"  {side:4} x{k:<2}: {n / elapsed:,.0f} msg/s; per message: heap blocks "
        f"{blocks[0] / n:.1f}, index blocks {blocks[1] / n:.1f}"
    )
    for name, read, fetched in indexes:
        print(f"      {name}: entries read {read / n:.1f}, heap tuples fetched {fetched / n:.1f}")


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--messages", type=int, default=4000, help="messages per drain")
    args = parser.parse_args()
    scratch = Scratch(server_url(args.database), "walk")
    try:
        for k in WORKERS:
            for side in ("ours", "pgmq"):
                url = scratch.create(f"{side}{k}")
                drain(side, url, k, args.messages)
                scratch.drop(f"{side}{k}")
    finally:
        scratch.drop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
