"""Benchmark report: the two faces and the pool, against raw psycopg measured in the same run.

Usage: ``python scripts/bench_async.py [--database URL] [--quick]``

1. sync ``Store.append`` vs a raw psycopg ``INSERT ... RETURNING`` on an autocommit connection
   (goal: median latency ratio <= 1.15), split into what our guarded statement costs the server
   (``append_message`` run raw vs the plain INSERT) and what the library adds around it;
2. async ``AsyncStore.append`` (one task) vs the same INSERT on a raw ``AsyncConnection``
   (goal <= 1.2);
3. 32 tasks appending concurrently through ``AsyncStore(pool_size=8)`` vs 32 tasks running the raw
   INSERT through a psycopg_pool ``AsyncConnectionPool`` of 8: throughput, reported as
   raw / ours (goal <= 1.25, i.e. ours at least 80 % of raw);
4. thread fairness: 32 threads appending through ``Store(pool_size=4)`` for 20 s (5 s with
   ``--quick``): ConnectErrors (goal 0), calls per thread (max / min), throughput vs 4 threads.

The raw INSERT is a plain ``VALUES`` insert, so the ratios include everything the store adds: the
guards of ``append_message`` (session open, agent running, rows locked FOR SHARE), validation,
the operation driver and the pool. Latency rounds alternate ours / baseline (ABAB) after warm-up
so load on this machine hits both. Nothing is asserted: this prints a report; scratch databases
``ikigai_bench_<pid>_<role>`` are dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

import ikigai_store as ik
from ikigai_store.config import redact
from ikigai_store.db import admin_url, create_database, drop_database, embedded_server_url
from ikigai_store.migrate import apply as migrate

RAW_INSERT = (
    "INSERT INTO messages (session_id, kind, content, data) VALUES (%s, 'user', %s, NULL) "
    "RETURNING id, session_id, agent_uuid, kind, content, data, created_at"
)
#: Our own append statement (session open, agent running, rows locked FOR SHARE), run raw.
GUARDED_INSERT = ik.queries.append_message.sql
GUARDED_PARAMS = {"agent_uuid": None, "kind": "user", "data": None, "target_message_id": None}
TEXT = "Refactor the parser so the lexer reports positions; then run the tests again."


class Row:
    def __init__(self, metric: str, baseline: str, ours: str, ratio: float, goal: str) -> None:
        self.cells = (metric, baseline, ours, f"{ratio:.2f}x", goal)
        self.met = eval_goal(ratio, goal)


def eval_goal(ratio: float, goal: str) -> bool:
    return ratio <= float(goal.split()[-1].rstrip("x"))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def new_session(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("INSERT INTO sessions (title) VALUES ('bench') RETURNING id").fetchone()
    assert row is not None
    return int(row[0])


def interleaved(rounds: int, per_round: int, *fns: Callable[[], None]) -> list[float]:
    """Median per-call latency of each function, measured in alternating rounds (ABCABC...)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out in zip(fns, times, strict=True):
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


async def ainterleaved(
    rounds: int,
    per_round: int,
    ours: Callable[[], Awaitable[Any]],
    base: Callable[[], Awaitable[Any]],
) -> tuple[float, float]:
    t_ours: list[float] = []
    t_base: list[float] = []
    for _ in range(rounds):
        for fn, out in ((ours, t_ours), (base, t_base)):
            for _ in range(per_round):
                t0 = time.perf_counter()
                await fn()
                out.append(time.perf_counter() - t0)
    return statistics.median(t_ours), statistics.median(t_base)


def bench_sync_append(url: str, rounds: int) -> list[Row]:
    print("\n[1] sync append vs raw INSERT ... RETURNING")
    sid = new_session(url)
    with ik.Store(url, pool_size=1) as store, psycopg.connect(url, autocommit=True) as raw:

        def ours() -> None:
            store.append(sid, "user", TEXT)

        def base() -> None:
            raw.execute(RAW_INSERT, (sid, TEXT)).fetchone()

        def guarded() -> None:  # our own statement, run raw: what the Python layer adds
            params = {**GUARDED_PARAMS, "session_id": sid, "content": TEXT}
            raw.execute(GUARDED_INSERT, params).fetchone()

        interleaved(2, 50, ours, guarded, base)  # warm-up: every side prepares its statement
        o, g, b = interleaved(rounds, 100, ours, guarded, base)
    print(f"  raw {ms(b)}   ours {ms(o)}   (our append_message SQL run raw: {ms(g)})")
    return [
        Row("sync append (median latency)", ms(b), ms(o), o / b, "<= 1.15x"),
        Row("  split: our guarded SQL run raw vs raw", ms(b), ms(g), g / b, "<= 1.15x"),
        Row("  split: the library around that SQL", ms(g), ms(o), o / g, "<= 1.15x"),
    ]


async def bench_async_append(url: str, rounds: int) -> Row:
    print("\n[2] async append (one task) vs raw async INSERT ... RETURNING")
    sid = new_session(url)
    store = await ik.AsyncStore.connect(url, pool_size=1)
    raw = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:

        async def ours() -> None:
            await store.append(sid, "user", TEXT)

        async def base() -> None:
            await (await raw.execute(RAW_INSERT, (sid, TEXT))).fetchone()

        await ainterleaved(2, 50, ours, base)
        o, b = await ainterleaved(rounds, 100, ours, base)
    finally:
        await store.close()
        await raw.close()
    print(f"  raw {ms(b)}   ours {ms(o)}")
    return Row("async append, one task (median latency)", ms(b), ms(o), o / b, "<= 1.20x")


async def bench_concurrent(url: str, total: int) -> Row:
    print("\n[3] 32 tasks on a pool of 8: throughput vs raw psycopg_pool")
    sid = new_session(url)
    tasks, per_task = 32, max(1, total // 32)

    async def run(fn: Callable[[], Awaitable[Any]]) -> float:
        async def worker() -> None:
            for _ in range(per_task):
                await fn()

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(tasks)))
        return tasks * per_task / (time.perf_counter() - t0)

    store = await ik.AsyncStore.connect(url, pool_size=8, timeout=30)
    pool = AsyncConnectionPool(
        url, min_size=8, max_size=8, kwargs={"autocommit": True}, open=False, timeout=30
    )
    await pool.open(wait=True)
    try:

        async def ours() -> None:
            await store.append(sid, "user", TEXT)

        async def base() -> None:
            async with pool.connection() as conn:
                await (await conn.execute(RAW_INSERT, (sid, TEXT))).fetchone()

        results: dict[str, list[float]] = {"ours": [], "raw": []}
        await run(ours)  # warm-up
        await run(base)
        for _ in range(3):
            results["ours"].append(await run(ours))
            results["raw"].append(await run(base))
    finally:
        await store.close()
        await pool.close()
    o, r = statistics.median(results["ours"]), statistics.median(results["raw"])
    print(f"  raw {r:,.0f} appends/s   ours {o:,.0f} appends/s")
    return Row(
        "32 tasks / pool of 8 (throughput, raw/ours)",
        f"{r:,.0f}/s",
        f"{o:,.0f}/s",
        r / o,
        "<= 1.25x",
    )


def fairness(url: str, threads: int, seconds: float) -> tuple[list[int], list[str], float]:
    sid = new_session(url)
    calls = [0] * threads
    errors: list[str] = []
    with ik.Store(url, pool_size=4, timeout=10) as store:
        stop = time.monotonic() + seconds

        def loop(i: int) -> None:
            while time.monotonic() < stop:
                try:
                    store.append(sid, "user", "x")
                except ik.ConnectError as exc:
                    errors.append(str(exc))
                    continue
                calls[i] += 1

        workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        elapsed = time.perf_counter() - t0
    return calls, errors, sum(calls) / elapsed


def bench_fairness(url: str, seconds: float) -> list[Row]:
    print(f"\n[4] thread fairness: 32 threads on a pool of 4 for {seconds:g} s")
    calls, errors, rate32 = fairness(url, 32, seconds)
    _, _, rate4 = fairness(url, 4, seconds)
    spread = max(calls) / max(1, min(calls))
    print(
        f"  ConnectErrors {len(errors)}; calls per thread min {min(calls)} median "
        f"{statistics.median(calls):.0f} max {max(calls)} (max/min {spread:.2f})"
    )
    print(f"  throughput: 32 threads {rate32:,.0f}/s, 4 threads {rate4:,.0f}/s")
    return [
        Row(
            "32 threads / pool of 4: ConnectErrors",
            "",
            str(len(errors)),
            float(len(errors)),
            "<= 0x",
        ),
        Row(
            "32 threads / pool of 4: calls max/min per thread",
            "",
            f"{min(calls)}..{max(calls)}",
            spread,
            "<= 2.00x",
        ),
        Row(
            "throughput 4 threads / 32 threads",
            f"{rate4:,.0f}/s",
            f"{rate32:,.0f}/s",
            rate4 / rate32,
            "<= 1.25x",
        ),
    ]


def report(rows: list[Row]) -> None:
    header = ("metric", "baseline", "ours", "ratio", "goal", "result")
    table = [(*r.cells, "met" if r.met else "NOT MET") for r in rows]
    widths = [max(len(c) for c in col) for col in zip(header, *table, strict=True)]
    print("\nsummary")
    for i, line in enumerate((header, *table)):
        print("  " + "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", metavar="URL", help="server for scratch databases")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, 5 s fairness run")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    server = args.database or embedded_server_url()
    with psycopg.connect(server) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    print(
        f"CPUs {os.cpu_count()}; Python {platform.python_version()}; psycopg "
        f"{psycopg.__version__}; PostgreSQL {version[0] if version else '?'}; ikigai_store "
        f"{ik.__version__}; server {redact(server)}"
    )
    name = f"ikigai_bench_{os.getpid()}_faces"
    drop_database(server, name)
    create_database(server, name)
    url = admin_url(server, name)
    try:
        migrate(url)
        rounds = 4 if args.quick else 10
        rows = bench_sync_append(url, rounds)
        rows.append(asyncio.run(bench_async_append(url, rounds)))
        rows.append(asyncio.run(bench_concurrent(url, 3200 if args.quick else 9600)))
        rows += bench_fairness(url, 5.0 if args.quick else 20.0)
    finally:
        drop_database(server, name)
    report(rows)
    print(f"\ntotal time {time.perf_counter() - t0:.1f} s; goals are targets, not assertions")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ik.IkigaiStoreError, psycopg.Error) as exc:
        print(f"\nbench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
