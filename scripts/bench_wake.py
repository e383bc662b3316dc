"""Wake-ups after the commit (migration 0032) vs inside the writing transaction (0.8.0), same run.

PostgreSQL serialises the commits of every transaction that issued NOTIFY (PreCommit_Notify
takes a database-wide lock held across the commit's WAL flush). This starts a PostgreSQL 15
whose durable commit is slow (``-c commit_delay=2000 -c commit_siblings=0``: a ~2 ms flush,
as on a cloud disk) and uses the default server too (the embedded one, or ``--database``),
and measures on each, with 16 connections (4 processes of 4 threads), for three waking
writes: appends to listened sessions (one session per connection), mail sends (one recipient
per connection) and publishes (one queue topic per connection: no shared sequencer lock); and
appends to sessions nobody listens to, which notify nothing either way (what the extra
statement after each append costs).

Two ways, alternated in the same run on the same database:
- ``inside``: 0.8.0's way. The connections do not set ``ikigai.wake_after_commit`` and the
  driver sends no ``send_wakes``: every trigger and query notifies in the writing transaction
  (migration 0032's ``ikigai_notify`` then calls ``pg_notify`` at once, as 0.8.0's did);
- ``after``: this branch's way. The notifications are kept in the session and sent by
  ``SELECT ikigai_send_wakes()`` after the write's commit, in a round trip of its own.

Prints writes/s for each and the ratio after/inside. Needs ``/usr/lib/postgresql/15/bin``
(or ``--pg-bin``); when run as root the server runs as the ``postgres`` user.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchkit
import psycopg

import ikigai_store as ik

PROCESSES = 4
THREADS = 4  # 16 connections
WORKLOADS = ("append", "append-unlistened", "send", "publish")
BODY = "x" * 1000


# ------------------------------------------------------------------------------ the workers


def _way(way: str) -> None:
    """Make this process's stores notify the ``way`` says (see the module docstring)."""
    from ikigai_store import pool

    if way == "inside":
        pool._WAKE_AFTER_COMMIT = "SELECT 1"  # no ikigai.wake_after_commit: no notice either


def _worker(
    url: str,
    way: str,
    workload: str,
    index: int,
    seconds: float,
    sessions: list[int],
    barrier: Any,
    results: Any,
) -> None:
    """One process: THREADS connections, each warmed up by one write, then (once all 16 are)
    doing ``workload`` for ``seconds``; puts how many writes they acknowledged in ``results``
    (or the first error's text)."""
    _way(way)
    counts = [0] * THREADS
    errors: list[BaseException] = []
    with ik.Store(url, pool_size=THREADS) as store:

        def write(n: int) -> None:
            if workload == "append":
                store.append(sessions[n], "user", BODY)
            elif workload == "append-unlistened":  # notifies nothing either way
                store.append(sessions[PROCESSES * THREADS + n], "user", BODY)
            elif workload == "send":
                store.mail.send("sender", f"r{n}", "hi", BODY)
            else:
                store.mail.publish("sender", f"q{n}", "job", BODY)

        def loop(t: int) -> None:
            n = index * THREADS + t
            try:
                write(n)  # a connection of its own, warm
                barrier.wait()
                end = time.perf_counter() + seconds
                done = 0
                while time.perf_counter() < end:
                    write(n)
                    done += 1
                counts[t] = done
            except BaseException as exc:
                errors.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=loop, args=(t,)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    results.put(repr(errors[0]) if errors else sum(counts))


def prepare(url: str) -> list[int]:
    """Identities, 16 queue topics, 16 listened sessions then 16 others; the session ids."""
    n = PROCESSES * THREADS
    with ik.Store(url, pool_size=1) as store:
        store.identities.register("sender")
        for i in range(n):
            store.identities.register(f"r{i}")
            store.topics.create(f"q{i}", "queue")
            store.topics.subscribe(f"r{i}", f"q{i}")
        sessions = [store.create_session(f"s{i}") for i in range(2 * n)]
    with psycopg.connect(url, autocommit=True) as conn:
        # Listened: appends wake the servers showing them (migration 0024).
        conn.execute(
            "UPDATE sessions SET listened_until = now() + interval '1 hour' WHERE id = ANY(%s)",
            (sessions[:n],),
        )
    return sessions


def measure(url: str, sessions: list[int], way: str, workload: str, seconds: float) -> float:
    """Writes/s of 16 connections doing ``workload`` the ``way`` says."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES * THREADS)
    results = ctx.Queue()
    processes = [
        ctx.Process(
            target=_worker,
            args=(url, way, workload, i, seconds, sessions, barrier, results),
        )
        for i in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    got = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join()
    failed = [g for g in got if isinstance(g, str)]
    if failed:
        raise RuntimeError(f"a {workload} failed: {failed[0]}")
    return sum(got) / seconds


# ------------------------------------------------------------------------------ the servers


def start_slow_server(pg_bin: Path, directory: Path, port: int) -> str:
    """A PostgreSQL whose durable commit waits ~2 ms (commit_delay); its server URL."""
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(directory, "postgres")
    data = directory / "data"
    subprocess.run(
        [*as_user, str(pg_bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    options = (
        f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c max_connections=100 "
        "-c commit_delay=2000 -c commit_siblings=0"
    )
    subprocess.run(
        [
            *as_user,
            str(pg_bin / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(directory / "log"),
            "-o",
            options,
            "-w",
            "start",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def stop_server(pg_bin: Path, directory: Path) -> None:
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run(
        [*as_user, str(pg_bin / "pg_ctl"), "-D", str(directory / "data"), "-m", "fast", "stop"],
        check=False,
        stdout=subprocess.DEVNULL,
    )


def run_server(
    name: str, server: str, seconds: float, rounds: int, workloads: list[str]
) -> list[benchkit.Row]:
    """Both ways, alternated ``rounds`` times, for every workload, on one server."""
    scratch = benchkit.Scratch(server, f"wake_{name}")
    rows: list[benchkit.Row] = []
    try:
        url = scratch.create("db")
        sessions = prepare(url)
        for workload in workloads:
            results: dict[str, list[float]] = {"inside": [], "after": []}
            for r in range(rounds):
                order = ("inside", "after") if r % 2 == 0 else ("after", "inside")
                for way in order:
                    results[way].append(measure(url, sessions, way, workload, seconds))
            inside, after = (sorted(results[w])[len(results[w]) // 2] for w in ("inside", "after"))
            ratio = after / inside if inside else float("inf")
            each = ", ".join(
                f"{a / i:.2f}x" for a, i in zip(results["after"], results["inside"], strict=True)
            )
            print(
                f"{name:8} {workload:8} inside {inside:8.0f}/s  after {after:8.0f}/s  "
                f"after/inside {ratio:.2f}x (each round: {each})",
                flush=True,
            )
            rows.append(
                benchkit.Row(
                    f"{name}: {workload}, 16 connections",
                    f"{after:.0f}/s vs {inside:.0f}/s: {ratio:.2f}x",
                    "slow: >1x; default: ~1x",
                    None,
                )
            )
    finally:
        scratch.drop_all()
    return rows


def main() -> int:
    parser = benchkit.arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measure (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations (default 2)")
    parser.add_argument("--pg-bin", default="/usr/lib/postgresql/15/bin")
    parser.add_argument("--port", type=int, default=55499)
    parser.add_argument("--only", choices=("slow", "default"), help="one server only")
    parser.add_argument(
        "--workload", action="append", choices=WORKLOADS, help="only these (repeatable)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    workloads = args.workload or list(WORKLOADS)
    rows: list[benchkit.Row] = []
    if args.only != "default":
        directory = Path(tempfile.mkdtemp(prefix="ikigai-bench-wake-"))
        pg_bin = Path(args.pg_bin)
        try:
            server = start_slow_server(pg_bin, directory, args.port)
            rows += run_server("slow", server, args.seconds, args.rounds, workloads)
        finally:
            stop_server(pg_bin, directory)
            shutil.rmtree(directory, ignore_errors=True)
    if args.only != "slow":
        server = benchkit.server_url(args.database)
        benchkit.environment(server)
        rows += run_server("default", server, args.seconds, args.rounds, workloads)
    return benchkit.summary(rows, started)


if __name__ == "__main__":
    benchkit.run(main)
