"""Benchmark report: how long a Claude Code hook takes as the fresh process Claude Code starts.

Usage: ``python scripts/bench_hooks.py [--database URL] [--data-dir DIR] [-n N]``

Wall time from spawning the command to its exit (stdin: a recorded hook event), N runs each
(default 20) of ``hook session-start``, ``hook prompt`` (no new mail: the common case) and
``hook pre-tool`` (an Edit of a free file), beside baselines measured in the same run:
``python -c pass`` (the interpreter alone), ``python -c 'import psycopg'`` (the driver every
hook needs: the floor of any hook that talks to PostgreSQL) and ``ikigai-store --version``
(the console script importing the package). Runs are interleaved round-robin (one of each
command per round), so load from other processes hits every command alike; p50 and p95
(nearest rank) per command, and each p50's ratio to every baseline. Goal: ``hook prompt`` p50
<= 300 ms (a target reported, never asserted; the exit status follows errors only).

Default: the embedded PostgreSQL, the code path of a hook with no URL configured, on a scratch
data dir (``--data-dir``, default ``<tmp>/ikigai-store-bench-hooks-<uid>/pgdata``, kept between
runs; ``IKIGAI_DATA_DIR`` points the hooks at it). This process holds that server up for the
whole run, so it is warm, as it is in a session where the MCP server holds it; the last user
stops it. With ``--database URL``: a scratch database on that server, dropped at the end.
Either way the hooks' state files go to a temporary ``XDG_STATE_HOME`` and the project is a
temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchkit import Scratch, environment, ms, nproc, pct

import ikigai_store as ik
from ikigai_store.embedded import embedded_server_url

GOAL_SECONDS = 0.300


@dataclass(frozen=True)
class Command:
    """One measured command: its argv and what it reads on stdin."""

    name: str
    argv: list[str]
    stdin: bytes = b""


def ikigai_store_script() -> str:
    """The ``ikigai-store`` console script of this interpreter (else the one on PATH)."""
    beside = Path(sys.executable).with_name("ikigai-store")
    found = str(beside) if beside.exists() else shutil.which("ikigai-store")
    if found is None:
        raise RuntimeError("no ikigai-store script beside this python or on PATH")
    return found


def commands(script: str, project: str) -> list[Command]:
    """The baselines, then the hooks, each with a recorded event of ``project``."""

    def event(name: str, **fields: object) -> bytes:
        data = {
            "session_id": "bench-session",
            "transcript_path": "/tmp/transcript.jsonl",
            "cwd": project,
            "hook_event_name": name,
            **fields,
        }
        return json.dumps(data).encode()

    return [
        Command("python -c pass", [sys.executable, "-c", "pass"]),
        Command("python -c 'import psycopg'", [sys.executable, "-c", "import psycopg"]),
        Command("ikigai-store --version", [script, "--version"]),
        Command(
            "hook session-start",
            [script, "hook", "session-start"],
            event("SessionStart", source="startup"),
        ),
        Command(
            "hook prompt",
            [script, "hook", "prompt"],
            event("UserPromptSubmit", prompt="run the tests"),
        ),
        Command(
            "hook pre-tool",
            [script, "hook", "pre-tool"],
            event(
                "PreToolUse",
                tool_name="Edit",
                tool_input={"file_path": f"{project}/src/app.py", "old_string": "a"},
            ),
        ),
    ]


def run_once(command: Command, env: dict[str, str]) -> float:
    """Seconds from spawn to exit; a failing or complaining hook is an error."""
    started = time.perf_counter()
    done = subprocess.run(command.argv, input=command.stdin, capture_output=True, env=env)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or done.stderr:
        raise RuntimeError(
            f"{command.name} failed (exit {done.returncode}): {done.stderr.decode().strip()}"
        )
    return elapsed


@contextmanager
def target(args: argparse.Namespace) -> Iterator[tuple[dict[str, str], str]]:
    """(the hooks' environment, the server URL to describe), with the database held up."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IKIGAI_", "CLAUDE_"))}
    env.pop("DATABASE_URL", None)
    with tempfile.TemporaryDirectory(prefix="ikigai-bench-hooks-") as tmp:
        env["XDG_STATE_HOME"] = os.path.join(tmp, "state")
        if args.database:
            scratch = Scratch(args.database, "hooks")
            try:
                url = scratch.create("db")
                env["IKIGAI_DATABASE_URL"] = url
                yield env, args.database
            finally:
                scratch.drop_all()
            return
        data_dir = Path(args.data_dir).resolve()
        os.environ["IKIGAI_DATA_DIR"] = env["IKIGAI_DATA_DIR"] = str(data_dir)
        print(f"  embedded server in {data_dir} (starting it if needed) ...", flush=True)
        with ik.open():  # migrated, and held up (warm) until the end of the run
            yield env, embedded_server_url(data_dir)


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
    parser.add_argument("-n", type=int, default=20, help="runs per command (default: 20)")
    args = parser.parse_args()
    script = ikigai_store_script()
    with target(args) as (env, server), tempfile.TemporaryDirectory() as project_dir:
        environment(server)
        print(f"  script      : {script}")
        project = os.path.realpath(project_dir)
        measured = commands(script, project)
        for command in measured:  # warm-up: bytecode caches, the identity, migrations
            run_once(command, env)
        times: dict[str, list[float]] = {c.name: [] for c in measured}
        for _ in range(args.n):
            for command in measured:
                times[command.name].append(run_once(command, env))
    report(times, args.n)
    return 0


def report(times: dict[str, list[float]], n: int) -> None:
    """The table: p50, p95 and the p50's ratios to each baseline, then the goal."""
    p50 = {name: statistics.median(xs) for name, xs in times.items()}
    python, version = p50["python -c pass"], p50["ikigai-store --version"]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nwall time per fresh process, {n} runs each (nproc {nproc()}, load now {load})\n")
    driver = p50["python -c 'import psycopg'"]
    print("| command | p50 | p95 | / python -c pass | / import psycopg | / --version |")
    print("|---|---|---|---|---|---|")
    for name, xs in times.items():
        print(
            f"| {name} | {ms(p50[name])} | {ms(pct(xs, 0.95))} | {p50[name] / python:.1f}x "
            f"| {p50[name] / driver:.2f}x | {p50[name] / version:.2f}x |"
        )
    prompt = p50["hook prompt"]
    verdict = "met" if prompt <= GOAL_SECONDS else "NOT MET"
    print(f"\ngoal: hook prompt p50 <= {ms(GOAL_SECONDS)}: {ms(prompt)}, {verdict} (a target)")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ik.IkigaiStoreError, RuntimeError, OSError) as exc:
        print(f"\nbench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
