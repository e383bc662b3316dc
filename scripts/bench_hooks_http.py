"""Benchmark report: ``hook pre-tool`` as Claude Code's ``http`` hook against a running server,
beside the same hook as a command (a fresh process).

Usage: ``python scripts/bench_hooks_http.py [--database URL] [--data-dir DIR] [-n N]``

Wall time of one PreToolUse decision (an Edit of a free file: the identity resolved, the live
file leases read), N rounds (default 40), each round measuring once, interleaved:
- ``SELECT 1`` on an open connection (the database's round trip: the floor of any query);
- ``http: pre-tool on a Read``: a POST to ``/hooks/pre-tool`` that the hook answers without
  the database (the server's floor: a new connection, HTTP, routing, a worker thread);
- ``http: pre-tool``: the Edit, a new connection per request (what a client without keep-alive
  pays), and ``http: pre-tool, keep-alive`` on one connection;
- ``python -c pass`` and ``command: hook pre-tool`` (the process Claude Code starts for a
  command hook).
p50 and p95 (nearest rank) per row, and each p50's ratio to ``SELECT 1`` and to the Read.
Goal: ``http: pre-tool`` p50 <= 10 ms (a target reported, never asserted; the exit status
follows errors only). The server is ``ikigai-store mcp --http --port 0`` spawned for the run,
on the database of ``scripts/bench_hooks.py``'s ``target`` (the embedded server on a scratch
data dir held warm, or a scratch database on ``--database``); requests use ``http.client``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from bench_hooks import Command, ikigai_store_script, run_once, target
from benchkit import environment, ms, nproc, pct

import ikigai_store as ik
from ikigai_store.embedded import embedded_url

GOAL_SECONDS = 0.010
HTTP_ROW = "http: pre-tool"


@contextmanager
def server(script: str, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """A spawned ``ikigai-store mcp --http --port 0``: (host, port), stopped at the end."""
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [script, "mcp", "--http", "--port", "0"],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                log.seek(0)
                found = re.search(r"serving http://([\d.]+):(\d+)/mcp", log.read())
                if found is not None:
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"the server did not start: {log.read().strip()}")
                time.sleep(0.05)
            yield found.group(1), int(found.group(2))
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def post(conn: http.client.HTTPConnection, body: bytes) -> float:
    """Seconds for one POST of ``body`` to /hooks/pre-tool on ``conn``; a non-200 is an
    error, and so is an answer (the edited file is free: nothing to say)."""
    started = time.perf_counter()
    conn.request("POST", "/hooks/pre-tool", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    answer = response.read()
    elapsed = time.perf_counter() - started
    if response.status != 200 or answer != b"{}":
        raise RuntimeError(f"pre-tool over http answered {response.status}: {answer[:200]!r}")
    return elapsed


def database_url(env: dict[str, str]) -> str:
    """The database the hooks use (``target``'s environment)."""
    url = env.get("IKIGAI_DATABASE_URL")
    return url if url is not None else embedded_url(Path(env["IKIGAI_DATA_DIR"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--database", metavar="URL", help="a server for a scratch database")
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        default=str(
            Path(tempfile.gettempdir()) / f"ikigai-store-bench-hooks-{os.getuid()}" / "pgdata"
        ),
        help="the embedded server's data dir (default: %(default)s)",
    )
    parser.add_argument("-n", type=int, default=40, help="rounds (default: 40)")
    args = parser.parse_args()
    script = ikigai_store_script()
    with (
        target(args) as (env, description),
        tempfile.TemporaryDirectory() as project_dir,
        server(script, env) as (host, port),
        psycopg.connect(database_url(env), autocommit=True) as db,
    ):
        environment(description)
        print(f"  script      : {script}\n  server      : http://{host}:{port}")
        project = os.path.realpath(project_dir)

        def event(tool: str) -> bytes:
            data = {
                "session_id": "bench-session",
                "transcript_path": "/tmp/transcript.jsonl",
                "cwd": project,
                "hook_event_name": "PreToolUse",
                "tool_name": tool,
                "tool_input": {"file_path": f"{project}/src/app.py", "old_string": "a"},
            }
            return json.dumps(data).encode()

        edit, read = event("Edit"), event("Read")
        kept = http.client.HTTPConnection(host, port, timeout=30)

        def fresh(body: bytes) -> Callable[[], float]:
            def once() -> float:
                conn = http.client.HTTPConnection(host, port, timeout=30)
                try:
                    return post(conn, body)
                finally:
                    conn.close()

            return once

        def select_one() -> float:
            started = time.perf_counter()
            db.execute("SELECT 1").fetchall()
            return time.perf_counter() - started

        python = Command("python -c pass", [sys.executable, "-c", "pass"])
        hook = Command("command: hook pre-tool", [script, "hook", "pre-tool"], edit)
        rows: dict[str, Callable[[], float]] = {
            "SELECT 1": select_one,
            "http: pre-tool on a Read": fresh(read),
            HTTP_ROW: fresh(edit),
            "http: pre-tool, keep-alive": lambda: post(kept, edit),
            python.name: lambda: run_once(python, env),
            hook.name: lambda: run_once(hook, env),
        }
        for measure in rows.values():  # warm-up: the identity, the hooks' store, caches
            measure()
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.n):
            for name, measure in rows.items():
                times[name].append(measure())
        kept.close()
    report(times, args.n)
    return 0


def report(times: dict[str, list[float]], n: int) -> None:
    """The table: p50, p95, the p50's ratios to SELECT 1 and to the Read; then the goal."""
    p50 = {name: statistics.median(xs) for name, xs in times.items()}
    floor, served = p50["SELECT 1"], p50["http: pre-tool on a Read"]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nwall time of one pre-tool decision, {n} rounds (nproc {nproc()}, load {load})\n")
    print("| row | p50 | p95 | / SELECT 1 | / http Read |")
    print("|---|---|---|---|---|")
    for name, xs in times.items():
        print(
            f"| {name} | {ms(p50[name])} | {ms(pct(xs, 0.95))} | {p50[name] / floor:.1f}x "
            f"| {p50[name] / served:.2f}x |"
        )
    over_http = p50[HTTP_ROW]
    speedup = p50["command: hook pre-tool"] / over_http
    verdict = "met" if over_http <= GOAL_SECONDS else "NOT MET"
    print(f"\nthe command takes {speedup:.0f}x as long as the http hook")
    print(f"goal: {HTTP_ROW} p50 <= {ms(GOAL_SECONDS)}: {ms(over_http)}, {verdict} (a target)")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ik.IkigaiStoreError, psycopg.Error, RuntimeError, OSError) as exc:
        print(f"\nbench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
