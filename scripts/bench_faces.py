"""Benchmark report: the sync and async faces and their pools vs raw psycopg, in the same run.

Usage: ``python scripts/bench_faces.py [--database URL] [--quick] [--profile]``

Four measurements, each against a baseline taken on the same server, in the same scratch
database, in the same run:

1. ``Store.append(sid, "user", text)`` vs raw psycopg on a sync autocommit connection executing
   the very statement text of ``queries/messages.sql`` ``append_event`` with the same
   parameters, one statement per call (goal: median latency ratio <= 1.15);
2. ``await AsyncStore.append(...)`` from one task vs the same statement on a raw
   ``psycopg.AsyncConnection`` (autocommit) (goal <= 1.2);
3. 32 tasks appending concurrently through ``AsyncStore(pool_size=8)`` vs 32 tasks running the
   same statement through ``psycopg_pool.AsyncConnectionPool(min_size=8, max_size=8)``, same
   number of appends: throughputs, reported as raw / ours (goal <= 1.25, i.e. ours >= 80 % of
   raw);
4. thread fairness: 32 threads appending in a loop through ``Store(pool_size=4, timeout=10)`` for
   20 s (5 s with ``--quick``): ConnectErrors (goal 0), calls per thread (min / median / max,
   max / min) over that continuous run; then throughput of the same store driven by 4 threads
   (one per connection, the baseline) vs 32 threads, in short alternating slices (5 x 2 s each;
   ``--quick``: 3 x 1 s), reported as 4-thread / 32-thread rate.

Since the baseline runs our own SQL, every ratio is what the library adds around the statement
(validation, the operation driver, the pool, dict rows, ``Message``), not the guard's server cost.

Invariants: nothing is asserted on timings (a report; the exit status is non-zero only on
errors); each measurement appends to a fresh session; both sides are warmed up alike before
timing (psycopg prepares a statement after 5 executions on a connection); latency rounds
alternate ours / baseline blocks (ABAB, the first side swapping every round) and throughput
rounds alternate whole runs, so load from other processes on this machine hits both sides;
medians everywhere. All data lives in one scratch database ``ikigai_bench_<pid>_faces`` on the
server of ``--database`` (default: the embedded server), dropped at the end, even on failure.
``--profile`` adds a cProfile of the ours side of (1) and (2): where the time goes per append.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import platform
import pstats
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg_pool
from psycopg_pool import AsyncConnectionPool

import ikigai_store as ik
from ikigai_store.config import admin_url, redact
from ikigai_store.embedded import embedded_server_url
from ikigai_store.migrate import apply as migrate
from ikigai_store.pool import create_database, drop_database

#: The statement ``Store.append`` runs for an event of no agent that is not a rewind (aiosql's
#: text of ``append_event``), run raw as baseline.
APPEND_SQL: str = ik.queries.append_event.sql
TEXT = "Refactor the parser so the lexer reports positions; then run the tests again."


def append_params(session_id: int) -> dict[str, Any]:
    """The parameters ``Store.append(session_id, "user", TEXT)`` binds to ``APPEND_SQL``."""
    return {
        "session_id": session_id,
        "kind": "user",
        "content": TEXT,
        "data": None,
    }


# ------------------------------------------------------------------------------------ report


@dataclass
class Row:
    """One line of the final summary table; ``met`` is None for rows reported without a goal."""

    metric: str
    baseline: str
    ours: str
    ratio: str
    goal: str
    met: bool | None

    @property
    def result(self) -> str:
        return "info" if self.met is None else "met" if self.met else "NOT MET"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def per_s(rate: float) -> str:
    return f"{rate:,.0f}/s"


def summary(rows: list[Row], quick: bool) -> None:
    header = ("metric", "baseline", "ours", "ratio", "goal", "result")
    table = [(r.metric, r.baseline, r.ours, r.ratio, r.goal, r.result) for r in rows]
    widths = [max(len(c) for c in col) for col in zip(header, *table, strict=True)]
    title = "summary (medians; --quick: fewer rounds, 5 s fairness run)" if quick else "summary"
    print(f"\n{title}")
    for i, line in enumerate((header, *table)):
        print("  " + "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def environment(server_url: str) -> None:
    with psycopg.connect(server_url) as conn:
        settings = {
            name: str((conn.execute(f"SHOW {name}").fetchone() or ("?",))[0])
            for name in ("server_version", "shared_buffers", "fsync", "synchronous_commit")
        }
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print("environment")
    print(f"  cores       : {os.cpu_count()} ({platform.machine()}); load average {load}")
    print(f"  Python      : {platform.python_version()} ({platform.python_implementation()})")
    print(
        f"  psycopg     : {psycopg.__version__} (libpq {psycopg.pq.version()}, "
        f"{psycopg.pq.__impl__}); psycopg_pool {psycopg_pool.__version__}"
    )
    print(f"  ikigai_store: {ik.__version__}")
    print(
        f"  PostgreSQL  : {settings['server_version']} (shared_buffers "
        f"{settings['shared_buffers']}, fsync {settings['fsync']}, synchronous_commit "
        f"{settings['synchronous_commit']})"
    )
    print(f"  server      : {redact(server_url)}")


# ------------------------------------------------------------------------------------ timing


@dataclass
class Latencies:
    """Per-call wall times of both sides, and the ours / baseline ratio of each round."""

    ours: list[float]
    base: list[float]
    round_ratios: list[float]

    def line(self, label: str) -> str:
        o, b = statistics.median(self.ours), statistics.median(self.base)
        rr = sorted(self.round_ratios)
        return (
            f"  {label}: raw {ms(b)}  ours {ms(o)}  ratio of medians {o / b:.3f}x; "
            f"per-round ratios min {rr[0]:.3f} median {statistics.median(rr):.3f} "
            f"max {rr[-1]:.3f} ({len(rr)} rounds)"
        )


def interleaved(
    ours: Callable[[], object],
    base: Callable[[], object],
    *,
    rounds: int,
    per_round: int,
    warmup: int,
) -> Latencies:
    """Time ``per_round`` calls of each side per round, alternating blocks, after warm-up."""
    clock = time.perf_counter
    for _ in range(warmup):
        ours()
        base()
    result = Latencies([], [], [])
    for r in range(rounds):
        block: dict[int, list[float]] = {0: [], 1: []}
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            fn, out = (ours, base)[which], block[which]
            for _ in range(per_round):
                t0 = clock()
                fn()
                out.append(clock() - t0)
        result.ours += block[0]
        result.base += block[1]
        result.round_ratios.append(statistics.median(block[0]) / statistics.median(block[1]))
    return result


async def ainterleaved(
    ours: Callable[[], Awaitable[object]],
    base: Callable[[], Awaitable[object]],
    *,
    rounds: int,
    per_round: int,
    warmup: int,
) -> Latencies:
    """``interleaved`` for coroutines (awaited one at a time, on the running loop)."""
    clock = time.perf_counter
    for _ in range(warmup):
        await ours()
        await base()
    result = Latencies([], [], [])
    for r in range(rounds):
        block: dict[int, list[float]] = {0: [], 1: []}
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            fn, out = (ours, base)[which], block[which]
            for _ in range(per_round):
                t0 = clock()
                await fn()
                out.append(clock() - t0)
        result.ours += block[0]
        result.base += block[1]
        result.round_ratios.append(statistics.median(block[0]) / statistics.median(block[1]))
    return result


def new_session(url: str, title: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO sessions (title) VALUES (%s) RETURNING id", (title,)
        ).fetchone()
    assert row is not None
    return int(row[0])


# ------------------------------------------------------------------------------------ benchmarks


def bench_sync(url: str, rounds: int, per_round: int) -> Row:
    print("\n[1] sync Store.append vs raw psycopg executing the same append_event statement")
    sid = new_session(url, "bench_faces sync")
    params = append_params(sid)
    with ik.Store(url, pool_size=1) as store, psycopg.connect(url, autocommit=True) as raw:

        def ours() -> None:
            store.append(sid, "user", TEXT)

        def base() -> None:
            raw.execute(APPEND_SQL, params).fetchone()

        lat = interleaved(ours, base, rounds=rounds, per_round=per_round, warmup=50)
    print(f"  {rounds} rounds x {per_round} calls each side, after 50 warm-up calls each")
    print(lat.line("sync append"))
    o, b = statistics.median(lat.ours), statistics.median(lat.base)
    return Row(
        "1 sync append, median latency", ms(b), ms(o), f"{o / b:.2f}x", "<= 1.15x", o / b <= 1.15
    )


async def bench_async(url: str, rounds: int, per_round: int) -> Row:
    print("\n[2] async AsyncStore.append (one task) vs raw AsyncConnection, same statement")
    sid = new_session(url, "bench_faces async")
    params = append_params(sid)
    store = await ik.AsyncStore.connect(url, pool_size=1, timeout=10)
    try:
        raw = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:

            async def ours() -> None:
                await store.append(sid, "user", TEXT)

            async def base() -> None:
                await (await raw.execute(APPEND_SQL, params)).fetchone()

            lat = await ainterleaved(ours, base, rounds=rounds, per_round=per_round, warmup=50)
        finally:
            await raw.close()
    finally:
        await store.close()
    print(f"  {rounds} rounds x {per_round} calls each side, after 50 warm-up calls each")
    print(lat.line("async append"))
    o, b = statistics.median(lat.ours), statistics.median(lat.base)
    return Row(
        "2 async append (1 task), median latency",
        ms(b),
        ms(o),
        f"{o / b:.2f}x",
        "<= 1.20x",
        o / b <= 1.2,
    )


async def bench_concurrent(url: str, rounds: int, per_task: int) -> Row:
    tasks, size = 32, 8
    total = tasks * per_task
    print(f"\n[3] {tasks} tasks on a pool of {size}: AsyncStore vs raw AsyncConnectionPool")
    sid = new_session(url, "bench_faces concurrent")
    params = append_params(sid)

    async def burst(fn: Callable[[], Awaitable[object]], n: int) -> float:
        """``tasks`` tasks calling ``fn`` ``n`` times each; appends per second."""

        async def worker() -> None:
            for _ in range(n):
                await fn()

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(tasks)))
        return tasks * n / (time.perf_counter() - t0)

    store = await ik.AsyncStore.connect(url, pool_size=size, timeout=30)
    pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
        url, min_size=size, max_size=size, kwargs={"autocommit": True}, timeout=30, open=False
    )
    try:
        await pool.open(wait=True)

        async def ours() -> None:
            await store.append(sid, "user", TEXT)

        async def base() -> None:
            async with pool.connection() as conn:
                await (await conn.execute(APPEND_SQL, params)).fetchone()

        # Warm-up: grows the store's pool (min_size 1) to its 8 connections and gets the
        # statement prepared on every connection of both pools.
        for _ in range(2):
            await burst(ours, 20)
            await burst(base, 20)
        # Private attributes, read for the report only (None if the internals change).
        inner = getattr(getattr(store, "_pool", None), "_pool", None)
        grown = inner.get_stats().get("pool_size") if inner is not None else None
        rates: dict[str, list[float]] = {"ours": [], "raw": []}
        for r in range(rounds):
            for side in ("ours", "raw") if r % 2 == 0 else ("raw", "ours"):
                rates[side].append(await burst(ours if side == "ours" else base, per_task))
    finally:
        await store.close()
        await pool.close()
    o, b = statistics.median(rates["ours"]), statistics.median(rates["raw"])
    print(
        f"  {rounds} rounds x {total} appends each side ({tasks} x {per_task}); "
        f"store pool grown to {grown} connections before timing"
    )
    print(
        "  raw  : " + "  ".join(per_s(x) for x in rates["raw"]) + f"  -> median {per_s(b)}\n"
        "  ours : " + "  ".join(per_s(x) for x in rates["ours"]) + f"  -> median {per_s(o)}"
    )
    paired = statistics.median(r / o for r, o in zip(rates["raw"], rates["ours"], strict=True))
    print(
        f"  raw / ours: ratio of medians {b / o:.3f}x, median of paired rounds {paired:.3f}x "
        f"(ours reaches {o / b:.0%} of raw)"
    )
    return Row(
        "3 32 tasks, pool of 8: throughput, raw/ours",
        per_s(b),
        per_s(o),
        f"{b / o:.2f}x",
        "<= 1.25x",
        b / o <= 1.25,
    )


@dataclass
class Fairness:
    """What ``threads`` threads did in ``seconds``: appends counted if finished by the end."""

    calls: list[int]
    connect_errors: int
    other_errors: list[str]
    seconds: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        return sum(self.calls) / self.seconds

    def __add__(self, other: Fairness) -> Fairness:
        """Two runs with the same number of threads, thread ``i`` added to thread ``i``."""
        return Fairness(
            [a + b for a, b in zip(self.calls, other.calls, strict=True)],
            self.connect_errors + other.connect_errors,
            self.other_errors + other.other_errors,
            self.seconds + other.seconds,
            self.latencies + other.latencies,
        )


def hammer(store: ik.Store, sid: int, threads: int, seconds: float) -> Fairness:
    """``threads`` threads appending through ``store`` in a loop for ``seconds``.

    They start together (a barrier); an append finishing after the deadline is not counted, so
    the rate is not diluted by the calls still queued on the pool when time is up.
    """
    calls = [0] * threads
    times: list[list[float]] = [[] for _ in range(threads)]
    connect_errors = [0] * threads
    other: list[str] = []
    start = threading.Barrier(threads + 1)
    stop = float("inf")

    def loop(i: int) -> None:
        clock, mine = time.perf_counter, times[i]
        start.wait()
        while (t0 := clock()) < stop:
            try:
                store.append(sid, "user", TEXT)
            except ik.ConnectError:
                connect_errors[i] += 1
                continue
            except ik.IkigaiStoreError as exc:
                other.append(f"{type(exc).__name__}: {exc}")
                continue
            t1 = clock()
            if t1 <= stop:
                mine.append(t1 - t0)
                calls[i] += 1

    workers = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
    for t in workers:
        t.start()
    stop = time.perf_counter() + seconds  # set before the barrier releases the threads
    start.wait()
    for t in workers:
        t.join()
    latencies = [x for per_thread in times for x in per_thread]
    return Fairness(calls, sum(connect_errors), other, seconds, latencies)


def describe(label: str, f: Fairness) -> None:
    lat = sorted(f.latencies)
    nan = float("nan")
    p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))] if lat else nan
    print(
        f"  {label}: {sum(f.calls)} appends in {f.seconds:.1f} s = {per_s(f.rate)}; "
        f"ConnectErrors {f.connect_errors}; other errors {len(f.other_errors)}"
    )
    print(
        f"    calls per thread min {min(f.calls)} median {statistics.median(f.calls):.0f} "
        f"max {max(f.calls)} (max/min {max(f.calls) / max(1, min(f.calls)):.2f}); latency "
        f"median {ms(statistics.median(lat) if lat else nan)} p99 {ms(p99)} "
        f"max {ms(lat[-1] if lat else nan)}"
    )
    for message in sorted(set(f.other_errors))[:3]:
        print(f"    error: {message}")


def bench_fairness(url: str, seconds: float, pairs: int, slice_s: float) -> list[Row]:
    print(
        f"\n[4] thread fairness: 32 threads on Store(pool_size=4, timeout=10) for {seconds:g} s;"
        f"\n    throughput baseline: 4 threads (one per connection), {pairs} x {slice_s:g} s slices"
        f" alternating with 32-thread slices"
    )
    sid = new_session(url, "bench_faces fairness")
    with ik.Store(url, pool_size=4, timeout=10) as store:
        hammer(store, sid, 4, 1.0)  # warm-up: grows the pool to 4, prepares on each connection
        many = hammer(store, sid, 32, seconds)
        slices: dict[int, list[Fairness]] = {4: [], 32: []}
        for r in range(pairs):
            for threads in (4, 32) if r % 2 == 0 else (32, 4):
                slices[threads].append(hammer(store, sid, threads, slice_s))
    describe(f"32 threads, {seconds:g} s", many)
    four, more = sum(slices[4][1:], slices[4][0]), sum(slices[32][1:], slices[32][0])
    describe("4 threads, slices", four)
    describe("32 threads, slices", more)
    r4 = [f.rate for f in slices[4]]
    r32 = [f.rate for f in slices[32]]
    paired = statistics.median(a / b for a, b in zip(r4, r32, strict=True))
    print("  slices 4 threads : " + "  ".join(per_s(x) for x in r4))
    print("  slices 32 threads: " + "  ".join(per_s(x) for x in r32))
    b, o = statistics.median(r4), statistics.median(r32)
    print(
        f"  4 threads / 32 threads: ratio of medians {b / o:.3f}x, "
        f"median of paired slices {paired:.3f}x"
    )
    errors = many.connect_errors + more.connect_errors + four.connect_errors
    spread = max(many.calls) / max(1, min(many.calls))
    median_calls = statistics.median(many.calls)
    return [
        Row(
            "4 32 threads, pool of 4: ConnectErrors",
            "",
            str(errors),
            "",
            "0",
            errors == 0 and not (many.other_errors or more.other_errors or four.other_errors),
        ),
        Row(
            "4 32 threads: calls/thread min/med/max, max/min",
            "",
            f"{min(many.calls)}/{median_calls:.0f}/{max(many.calls)}",
            f"{spread:.2f}x",
            "(report)",
            None,
        ),
        Row(
            "4 throughput 4 thr (base) vs 32 thr, base/ours",
            per_s(b),
            per_s(o),
            f"{b / o:.2f}x",
            "(report)",
            None,
        ),
    ]


# ------------------------------------------------------------------------------------ profile


def show_profile(profile: cProfile.Profile, calls: int, title: str, top: int = 22) -> None:
    """The ``top`` functions by own time, per append (microseconds)."""
    stats = pstats.Stats(profile)
    entries: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _cc, _nc, tt, _ct, _callers in entries.values())
    print(f"\n  {title}: {calls} appends, {total / calls * 1e6:.1f} us/append profiled in total")
    print(f"    {'own us':>7} {'cum us':>7} {'calls':>6}  function")
    ranked = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    for (path, line, func), (_cc, nc, tt, ct, _callers) in ranked:
        where = path if path == "~" else f"{'/'.join(path.split('/')[-2:])}:{line}"
        print(
            f"    {tt / calls * 1e6:7.1f} {ct / calls * 1e6:7.1f} {nc / calls:6.1f}  {func} {where}"
        )


def profile_appends(url: str, calls: int) -> None:
    print("\n[profile] cProfile of the ours side (profiling inflates Python-heavy code)")
    sid = new_session(url, "bench_faces profile")
    with ik.Store(url, pool_size=1) as store:
        for _ in range(50):
            store.append(sid, "user", TEXT)
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(calls):
            store.append(sid, "user", TEXT)
        profile.disable()
    show_profile(profile, calls, "sync Store.append")

    async def run() -> cProfile.Profile:
        store = await ik.AsyncStore.connect(url, pool_size=1)
        try:
            for _ in range(50):
                await store.append(sid, "user", TEXT)
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(calls):
                await store.append(sid, "user", TEXT)
            profile.disable()
            return profile
        finally:
            await store.close()

    show_profile(asyncio.run(run()), calls, "async AsyncStore.append (one task)")


# ------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database",
        metavar="URL",
        help="a PostgreSQL URL; the scratch database is created on its server (default: embedded)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer rounds and a 5 s fairness run (smoke run)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also cProfile the ours side of (1) and (2)"
    )
    args = parser.parse_args(argv)
    quick: bool = args.quick

    t0 = time.perf_counter()
    server_url = args.database or embedded_server_url()
    environment(server_url)
    name = f"ikigai_bench_{os.getpid()}_faces"
    drop_database(server_url, name)
    create_database(server_url, name)
    rows: list[Row] = []
    try:
        url = admin_url(server_url, name)
        migrate(url)
        rounds, per_round = (8, 50) if quick else (20, 100)
        rows.append(bench_sync(url, rounds, per_round))
        rows.append(asyncio.run(bench_async(url, rounds, per_round)))
        rows.append(asyncio.run(bench_concurrent(url, *((6, 20) if quick else (12, 30)))))
        rows += bench_fairness(url, *((5.0, 3, 1.0) if quick else (20.0, 5, 2.0)))
        if args.profile:
            profile_appends(url, 500 if quick else 2000)
    finally:
        try:
            drop_database(server_url, name)
        except ik.IkigaiStoreError as exc:
            print(f"warning: could not drop scratch database {name}: {exc}", file=sys.stderr)
    summary(rows, quick)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\ntotal time {time.perf_counter() - t0:.1f} s (load average now {load}); "
        "goals are targets, not assertions"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ik.IkigaiStoreError, psycopg.Error, RuntimeError) as exc:
        print(f"\nbench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
