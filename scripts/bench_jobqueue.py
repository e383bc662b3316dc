"""Benchmark report: our queue topic vs procrastinate, a Python job queue on PostgreSQL (issue 38),
on the same server, in the same run.

Usage: ``python scripts/bench_jobqueue.py [--database URL] [--jobs N] [--runs R] [--quick]``
(with no URL: ``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server; set
``IKIGAI_DATA_DIR`` to run the embedded server on a private data directory). The peer is not a
dependency of the library: ``pip install '.[bench]'`` (or ``pip install 'procrastinate>=3.10,<4'``)
first; the script says so and stops when it is missing.

The task, for each side, in a fresh scratch database per run (ours migrated; procrastinate's
schema applied with its own ``schema_manager``), ``--jobs`` jobs (default 2,000) with a small
JSON payload ``{"n": k}``:

1. **defer**: 4 producer processes (multiprocessing, spawn) each submit their quarter of the
   jobs one at a time (one transaction each, as an application submits work): ours
   ``store.mail.publish`` to a queue topic (sync ``Store``), procrastinate
   ``task.defer_async(n=k)`` (its ``PsycopgConnector``, the connector it recommends);
2. **process**: 4 worker processes drain them: ours with our fastest exactly-once loop, ``held =
   store.topics.claim(worker, topic, complete=held)`` (one statement per job: the claim of
   the next completes the previous); procrastinate's own worker, ``app.run_worker_async(
   concurrency=1, wait=False, listen_notify=False)`` (it stops when the queue is empty, and
   keeps each job's row: ``delete_jobs="never"``, its default). Every job's handler records
   its ``n``.

Each worker warms up first (ours 20 claims of a warm-up topic, procrastinate a worker run over
a warm-up queue of 20 jobs: connections, prepared statements), then all start together.
Throughput = jobs / (last finish - first start), per phase, and for the whole (defer + process).
Runs alternate which side goes first. Reported: the medians of the runs and the ratio ours /
procrastinate per phase (goal: >= 1.0x), with the per-run ratios (their spread is the noise).

Checked after every run (a failure makes the exit status non-zero): every job was handled
exactly once (the ``n`` the workers recorded are 0..N-1, each once), ours: every queue row of
the topic is ``done`` after one attempt; procrastinate: every job row ``succeeded`` after one
attempt. Where the time goes: what each side's backends wait on during each phase
(``pg_stat_activity``, sampled every 10 ms), and the client CPU per job of the producers and
the workers (``time.process_time``).

Nothing is asserted on timings. The machine's load is printed: on a shared machine, compare
ratios, not rates. The publish path of queue topics is being reworked (issue 38, topic
offsets): re-run this script after it lands.
"""

from __future__ import annotations

import asyncio
import collections
import importlib.metadata
import json
import logging
import multiprocessing as mp
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from benchkit import (
    Row,
    Scratch,
    arguments,
    describe_waits,
    environment,
    register,
    run,
    server_url,
    summary,
    what_backends_do,
)

import ikigai_store as ik

PRODUCERS = 4
WORKERS = 4
WARMUP = 20
LEASE = 300.0  # no lease runs out during a run: every job is claimed once
TOPIC, WARM_TOPIC = "jobs", "warm"
QUEUE, WARM_QUEUE = "jobs", "warm"


def peer_version() -> str:
    """procrastinate's installed version, or exit saying how to install it."""
    try:
        return importlib.metadata.version("procrastinate")
    except importlib.metadata.PackageNotFoundError:
        print(
            "bench_jobqueue needs procrastinate: pip install '.[bench]' "
            "(or pip install 'procrastinate>=3.10,<4')",
            file=sys.stderr,
        )
        sys.exit(2)


# ------------------------------------------------------------------------------------ peer


def peer_app(url: str, handled: list[int] | None = None) -> Any:
    """A procrastinate app on ``url`` with one task, ``job``, recording each ``n``."""
    import procrastinate

    # It warns that the app lives in __main__ (so its tasks import by that name): harmless here.
    logging.getLogger("procrastinate").setLevel(logging.ERROR)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="job", queue=QUEUE)
    async def job(n: int) -> None:
        if handled is not None:
            handled.append(n)

    return app


def peer_setup(url: str) -> None:
    """procrastinate's schema, and the warm-up queue's jobs."""

    async def main() -> None:
        app = peer_app(url)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            job = app.tasks["job"]
            await job.configure(queue=WARM_QUEUE).batch_defer_async(
                *({"n": -1 - k} for k in range(WORKERS * WARMUP))
            )

    asyncio.run(main())


def peer_producer(url: str, ks: list[int], go: Any, results: Any) -> None:
    """Defer one job per ``k`` once ``go`` is set; report (t0, t1, client CPU)."""

    async def main() -> None:
        app = peer_app(url)
        async with app.open_async():
            job = app.tasks["job"]
            await job.configure(queue=WARM_QUEUE).defer_async(n=-(10**6))  # pool, statement
            results.put(("ready",))
            while not go.is_set():
                await asyncio.sleep(0.001)
            t0, c0 = time.monotonic(), time.process_time()
            for k in ks:
                await job.defer_async(n=k)
            results.put(("done", t0, time.monotonic(), time.process_time() - c0, []))

    try:
        asyncio.run(main())
    except Exception as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def peer_worker(url: str, go: Any, results: Any) -> None:
    """Drain the queue once ``go`` is set (after a warm-up run); report (t0, t1, CPU, ns)."""

    async def main() -> None:
        handled: list[int] = []
        app = peer_app(url, handled)
        options: dict[str, Any] = {
            "concurrency": 1,
            "wait": False,
            "listen_notify": False,
            "install_signal_handlers": False,
        }
        async with app.open_async():
            await app.run_worker_async(queues=[WARM_QUEUE], **options)
            handled.clear()
            results.put(("ready",))
            while not go.is_set():
                await asyncio.sleep(0.001)
            t0, c0 = time.monotonic(), time.process_time()
            await app.run_worker_async(queues=[QUEUE], **options)
            results.put(("done", t0, time.monotonic(), time.process_time() - c0, handled))

    try:
        asyncio.run(main())
    except Exception as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def peer_check(url: str, n: int) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded' AND attempts = 1) "
            "FROM procrastinate_jobs WHERE queue_name = %s",
            (QUEUE,),
        ).fetchone()
    assert row is not None
    if tuple(row) != (n, n):
        return f"procrastinate_jobs (count, succeeded after one attempt) = {tuple(row)}, not {n, n}"
    return None


# ------------------------------------------------------------------------------------ ours


def ours_setup(url: str) -> None:
    """The queue topics, their subscribed workers, and the warm-up topic's messages."""
    names = [f"p{i}" for i in range(PRODUCERS)] + [f"w{i}" for i in range(WORKERS)]
    register(url, *names)
    with ik.Store(url, pool_size=1) as store:
        for topic in (TOPIC, WARM_TOPIC):
            store.topics.create(topic, "queue")
            for i in range(WORKERS):
                store.topics.subscribe(f"w{i}", topic)
        for k in range(WORKERS * WARMUP):
            store.mail.publish("p0", WARM_TOPIC, "job", json.dumps({"n": -1 - k}))


def ours_producer(url: str, name: str, ks: list[int], go: Any, results: Any) -> None:
    try:
        with ik.Store(url, pool_size=1) as store:
            store.identities.get(name)  # connection, caches
            results.put(("ready",))
            if not go.wait(120):
                raise RuntimeError("never started")
            t0, c0 = time.monotonic(), time.process_time()
            for k in ks:
                store.mail.publish(name, TOPIC, "job", json.dumps({"n": k}))
            results.put(("done", t0, time.monotonic(), time.process_time() - c0, []))
    except Exception as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def ours_worker(url: str, name: str, go: Any, results: Any) -> None:
    try:
        handled: list[int] = []
        with ik.Store(url, pool_size=1) as store:
            held = store.topics.claim(name, WARM_TOPIC, ttl=LEASE)
            for _ in range(WARMUP):
                if held is None:
                    break
                held = store.topics.claim(name, WARM_TOPIC, ttl=LEASE, complete=held)
            if held is not None:
                store.topics.complete(held)
            results.put(("ready",))
            if not go.wait(120):
                raise RuntimeError("never started")
            t0, c0 = time.monotonic(), time.process_time()
            held = store.topics.claim(name, TOPIC, ttl=LEASE)
            while held is not None:
                handled.append(json.loads(held.mail.body)["n"])
                held = store.topics.claim(name, TOPIC, ttl=LEASE, complete=held)
            results.put(("done", t0, time.monotonic(), time.process_time() - c0, handled))
    except Exception as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def ours_check(url: str, n: int) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE q.state = 'done' AND q.attempts = 1) "
            "FROM queue_items AS q JOIN topics AS t ON t.id = q.topic_id WHERE t.name = %s",
            (TOPIC,),
        ).fetchone()
    assert row is not None
    if tuple(row) != (n, n):
        return f"queue_items (count, done after one attempt) = {tuple(row)}, not {n, n}"
    return None


# ------------------------------------------------------------------------------------ runs


@dataclass
class Phase:
    seconds: float
    cpu_per_job: float  # client CPU, all processes, per job
    waits: str
    handled: list[int]


@dataclass
class Run:
    defer: Phase
    process: Phase
    problems: list[str]

    @property
    def total(self) -> float:
        return self.defer.seconds + self.process.seconds


def phase(url: str, n: int, targets: list[tuple[Any, tuple[Any, ...]]]) -> Phase:
    """Start one process per (function, args) (each gets ``go`` and ``results`` appended),
    wait until all are ready, start them together, sample the backends' waits meanwhile."""
    ctx = mp.get_context("spawn")
    go, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=fn, args=(*args, go, results)) for fn, args in targets]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            msg = results.get(timeout=120)
            if msg[0] == "error":
                raise RuntimeError(f"a process failed: {msg[1]}")
        counts: collections.Counter[str] = collections.Counter()
        stop = threading.Event()
        sampler = threading.Thread(target=what_backends_do, args=(url, stop, counts))
        sampler.start()
        go.set()
        done = []
        try:
            for _ in procs:
                msg = results.get(timeout=600)
                if msg[0] == "error":
                    raise RuntimeError(f"a process failed: {msg[1]}")
                done.append(msg)
        finally:
            stop.set()
            sampler.join()
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    start, end = min(d[1] for d in done), max(d[2] for d in done)
    handled = [k for d in done for k in d[4]]
    return Phase(end - start, sum(d[3] for d in done) / n, describe_waits(counts, 3), handled)


def quarters(n: int) -> list[list[int]]:
    return [list(range(i, n, PRODUCERS)) for i in range(PRODUCERS)]


def one_run(scratch: Scratch, side: str, n: int, tag: str) -> Run:
    url = scratch.create(tag)
    try:
        if side == "ours":
            ours_setup(url)
            defer = phase(
                url,
                n,
                [(ours_producer, (url, f"p{i}", ks)) for i, ks in enumerate(quarters(n))],
            )
            process = phase(url, n, [(ours_worker, (url, f"w{i}")) for i in range(WORKERS)])
            problem = ours_check(url, n)
        else:
            peer_setup(url)
            defer = phase(url, n, [(peer_producer, (url, ks)) for ks in quarters(n)])
            process = phase(url, n, [(peer_worker, (url,)) for _ in range(WORKERS)])
            problem = peer_check(url, n)
    finally:
        scratch.drop(tag)
    problems = [] if problem is None else [problem]
    if sorted(process.handled) != list(range(n)):
        seen = collections.Counter(process.handled)
        twice = sum(1 for c in seen.values() if c > 1)
        missing = n - len(set(process.handled) & set(range(n)))
        problems.append(f"{side}: {twice} jobs handled twice, {missing} never")
    return Run(defer, process, problems)


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per run (default 2,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per side (default 3)")
    parser.add_argument("--quick", action="store_true", help="400 jobs, one run per side")
    args = parser.parse_args()
    n, runs = (400, 1) if args.quick else (args.jobs, args.runs)
    version = peer_version()
    started = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    print(f"  procrastinate: {version}")
    scratch = Scratch(server, "jobqueue")
    results: dict[str, list[Run]] = {"ours": [], "procrastinate": []}
    try:
        for r in range(runs):
            order = ["ours", "procrastinate"] if r % 2 == 0 else ["procrastinate", "ours"]
            for side in order:
                got = one_run(scratch, side, n, f"{side[:4]}{r}")
                results[side].append(got)
                print(
                    f"  run {r + 1} {side:13}: defer {n / got.defer.seconds:7.0f} jobs/s "
                    f"(client CPU {got.defer.cpu_per_job * 1e6:.0f} µs/job; waits: "
                    f"{got.defer.waits})\n  {'':20} process {n / got.process.seconds:5.0f} "
                    f"jobs/s (client CPU {got.process.cpu_per_job * 1e6:.0f} µs/job; waits: "
                    f"{got.process.waits})",
                    flush=True,
                )
    finally:
        scratch.drop_all()
    rows: list[Row] = []
    for what in ("defer", "process", "defer + process"):

        def rate(run: Run, what: str = what) -> float:
            seconds = {"defer": run.defer.seconds, "process": run.process.seconds}.get(
                what, run.total
            )
            return n / seconds

        ours = [rate(x) for x in results["ours"]]
        theirs = [rate(x) for x in results["procrastinate"]]
        a, b = statistics.median(ours), statistics.median(theirs)
        per_run = ", ".join(f"{x / y:.2f}" for x, y in zip(ours, theirs, strict=True))
        rows.append(
            Row(
                f"{what}, {n:,} jobs, {PRODUCERS if what == 'defer' else WORKERS} processes: "
                f"ours vs procrastinate {version} (median of {runs}; per run {per_run})",
                f"{a:,.0f} vs {b:,.0f} jobs/s = {a / b:.2f}x",
                "≥ 1.0x",
                a / b >= 1.0,
            )
        )
    problems = [p for side in results.values() for run in side for p in run.problems]
    rows.append(
        Row(
            "every job handled exactly once, both sides, every run",
            "yes" if not problems else "; ".join(problems),
            "yes",
            not problems,
            check=True,
        )
    )
    return summary(rows, started)


if __name__ == "__main__":
    run(main)
