"""Benchmark report: wake latency, from the commit of a send to the agent's ``watch`` line.

Usage: ``python scripts/bench_watch.py [--database URL] [--samples N]``

Measured in one run, on one scratch database, one mail at a time (N sends, default 200):

1. ``ikigai-store watch``: a spawned watcher process; the time from issuing
   ``store.mail.send`` in this process (its commit included: a notification is delivered at
   commit, often before the sender hears that its commit is done, so the clock starts before
   the send) to the mail's line read from the watcher's stdout. Goal: p95 <= 100 ms
   (Subtrate's watcher polls every 5 s; mcp_agent_mail reminds at most every 120 s);
2. ``store.watch.next`` in this process (another thread waits with a timeout), the same
   latency without a process boundary or a pipe;
3. the floor: a bare ``LISTEN ikigai_mail`` connection receiving the trigger's NOTIFY of the
   same send (what PostgreSQL itself takes to deliver a notification).

Sends alternate between the sides in blocks (ABAB), so load from other processes hits all of
them. Nothing is asserted on timings; the scratch database ``ikigai_bench_<pid>_watch_main``
is dropped at the end, even on failure.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time

import psycopg
from benchkit import Row, Scratch, arguments, environment, ms, pct, run, server_url, summary

import ikigai_store as ik

SUBTRATE_POLL_S = 5.0
AGENT_MAIL_REMIND_S = 120.0
GOAL_S = 0.100


def _watcher(url: str, name: str) -> tuple[subprocess.Popen[str], queue.Queue[float]]:
    """A spawned ``ikigai-store watch --as NAME`` and a queue of the times its lines arrive."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ikigai_store", "--database", url, "watch", "--as", name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    arrivals: queue.Queue[float] = queue.Queue()
    assert process.stdout is not None and process.stderr is not None
    assert "watching" in process.stderr.readline()

    def read() -> None:
        assert process.stdout is not None
        for _ in process.stdout:
            arrivals.put(time.perf_counter())

    threading.Thread(target=read, daemon=True).start()
    return process, arrivals


def _listener(url: str, stop: threading.Event) -> queue.Queue[float]:
    """A bare LISTEN connection: a queue of the times its notifications arrive."""
    arrivals: queue.Queue[float] = queue.Queue()
    ready = threading.Event()

    def listen() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("LISTEN ikigai_mail")
            ready.set()
            while not stop.is_set():
                for _ in conn.notifies(timeout=0.2):
                    arrivals.put(time.perf_counter())

    threading.Thread(target=listen, daemon=True).start()
    ready.wait(10)
    return arrivals


def _next_in_process(
    store: ik.Store, name: str, stop: threading.Event
) -> tuple[queue.Queue[float], threading.Thread]:
    """A thread waiting in ``store.watch.next``: a queue of the times it returns a notice."""
    arrivals: queue.Queue[float] = queue.Queue()

    def wait() -> None:
        seen = store.watch.next(name).seen
        while not stop.is_set():
            batch = store.watch.next(name, seen=seen, timeout=0.5)
            if batch.notices:
                arrivals.put(time.perf_counter())
            seen = batch.seen

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return arrivals, thread


def measure(url: str, samples: int) -> list[Row]:
    with ik.Store(url, pool_size=4) as store:
        for name in ("Sender", "Cli", "Proc", "Bare"):
            store.identities.register(name)
        process, cli = _watcher(url, "Cli")
        stop = threading.Event()
        proc, waiter = _next_in_process(store, "Proc", stop)
        try:
            sides: dict[str, tuple[str, queue.Queue[float]]] = {
                "watch": ("Cli", cli),
                "next": ("Proc", proc),
                "notify": ("Bare", _listener(url, stop)),
            }
            time.sleep(0.5)
            latencies: dict[str, list[float]] = {side: [] for side in sides}
            sent: dict[str, list[float]] = {side: [] for side in sides}

            def once(side: str) -> float:
                to, arrivals = sides[side]
                started = time.perf_counter()
                store.mail.send("Sender", to, "bench", "wake up")
                sent[side].append(time.perf_counter() - started)
                return arrivals.get(timeout=10) - started

            def drain(q: queue.Queue[float]) -> None:
                while not q.empty():
                    q.get_nowait()

            for side in sides:  # warm up
                for _ in range(5):
                    drain(sides["notify"][1])
                    once(side)
                    time.sleep(0.02)
            block = 20
            for _ in range(max(1, samples // block)):
                for side in sides:
                    for _ in range(block):
                        drain(sides["notify"][1])  # every send notifies the bare listener
                        latencies[side].append(once(side))
                        time.sleep(0.01)  # let the other listeners settle
        finally:
            stop.set()
            waiter.join(timeout=10)
            process.terminate()
            process.wait(timeout=20)
    send_p50 = pct([x for values in sent.values() for x in values], 0.5)
    rows = [Row("store.mail.send itself (to its commit): p50", ms(send_p50), "", None)]
    labels = {
        "watch": "ikigai-store watch line (spawned process)",
        "next": "store.watch.next in-process",
        "notify": "bare LISTEN: the trigger's NOTIFY (floor)",
    }
    for side, values in latencies.items():
        p95 = pct(values, 0.95)
        goal, met = ("p95 <= 100 ms", p95 <= GOAL_S) if side == "watch" else ("", None)
        rows.append(
            Row(
                f"send issued -> {labels[side]}: p50 / p95",
                f"{ms(pct(values, 0.5))} / {ms(p95)}",
                goal,
                met,
            )
        )
    watch_p50 = pct(latencies["watch"], 0.5)
    floor_p50 = pct(latencies["notify"], 0.5)
    rows.append(Row("watch line / NOTIFY floor (p50)", f"{watch_p50 / floor_p50:.1f}x", "", None))
    rows.append(
        Row(
            "Subtrate's 5 s poll (mean wait 2.5 s) / watch p50",
            f"{SUBTRATE_POLL_S / 2 / watch_p50:,.0f}x",
            "",
            None,
        )
    )
    rows.append(
        Row(
            "mcp_agent_mail's 120 s reminder (mean 60 s) / watch p50",
            f"{AGENT_MAIL_REMIND_S / 2 / watch_p50:,.0f}x",
            "",
            None,
        )
    )
    return rows


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--samples", type=int, default=200, help="sends per side (default 200)")
    options = parser.parse_args()
    started = time.perf_counter()
    server = server_url(options.database)
    environment(server)
    scratch = Scratch(server, "watch")
    try:
        url = scratch.create("main")
        rows = measure(url, options.samples)
    finally:
        scratch.drop_all()
    return summary(rows, started)


if __name__ == "__main__":
    run(main)
