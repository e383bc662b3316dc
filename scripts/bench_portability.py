"""Benchmark report: export and import of a session (issue 21) against COPY in the same run.

Usage: ``python scripts/bench_portability.py [--database URL] [--events N] [--quick]`` (with no
URL: ``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server; set
``IKIGAI_DATA_DIR`` to run the embedded server on a private data directory).

A scratch database ``source`` holds two sessions filled with ``INSERT ... SELECT
generate_series`` (``--events``, default 1,000,000, and a tenth of it): alternating user and
assistant events of 60-180 characters, a mark every 1,000 events and a rewind to it 500 later,
under two agents (the second forked from the first half way). A scratch database ``target``
receives the imports. Measurements (best of ``--rounds``, alternating the sides):

1. ``store.export_session`` of the big session to a file (format version 2: a JSON header
   naming the event columns, JSON session and agent lines, the events in COPY's text format,
   a hashed trailer) vs ``COPY (SELECT id, agent_uuid, kind, content, data, created_at FROM
   messages WHERE session_id = ... ORDER BY id) TO STDOUT`` of the same rows to a file
   (psycopg, text format): goal ≤ 1.5x (issue 38).
2. ``store.import_session`` of that file into ``target`` vs ``COPY ... FROM STDIN`` of the
   baseline's rows into a plain table (same columns, no index, no trigger): goal ≤ 2x. For
   information: the same rows ``INSERT ... SELECT``-ed from that plain table into ``messages``
   (what any import into the real table pays: its indexes, the search-vector trigger, the
   foreign keys).
3. Peak RSS (``ru_maxrss``) of ``ikigai-store export`` and ``ikigai-store import`` run as
   child processes, for the small and the big session: constant memory means equal peaks.

Invariants: nothing is asserted on timings; the exit status is non-zero on errors or when the
import does not replay like the export (a correctness check on the small session). Scratch
databases are dropped at the end, even on failure. ``--quick``: 20,000 events, one round.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from benchkit import Row, Scratch, arguments, environment, run, server_url, step, summary

import ikigai_store as ik

FILL = """
INSERT INTO messages (session_id, agent_uuid, kind, content, data)
SELECT %(sid)s, %(agent)s,
       CASE WHEN g %% 1000 = 1 THEN 'mark' WHEN g %% 1000 = 501 THEN 'user'
            WHEN g %% 2 = 0 THEN 'user' ELSE 'assistant' END,
       repeat('event ' || g || ' of the benchmark session; ', 1 + g %% 3),
       CASE WHEN g %% 1000 = 1 THEN jsonb_build_object('label', 'm' || g) END
FROM generate_series(1, %(n)s) AS g
"""
BASELINE_OUT = (
    "COPY (SELECT id, agent_uuid, kind, content, data, created_at FROM messages "
    "WHERE session_id = %s ORDER BY id) TO STDOUT"
)
PLAIN = (
    "CREATE TABLE IF NOT EXISTS plain_events (id bigint, agent_uuid text, kind text, "
    "content text, data jsonb, created_at timestamptz)"
)


def fill(url: str, events: int) -> int:
    """A session of ``events`` events under two agents (the second forked half way), with
    marks and rewinds; its id."""
    with ik.Store(url, pool_size=1) as store:
        sid = store.create_session(f"bench {events}")
        root = store.create_agent(sid, name="root")
        with store._connection() as conn:
            conn.execute(FILL, {"sid": sid, "n": events // 2, "agent": root.uuid})
        child = store.fork_agent(root.uuid, name="child")
        with store._connection() as conn:
            conn.execute(FILL, {"sid": sid, "n": events // 2, "agent": child.uuid})
            # a rewind to each mark, 500 events later, as append would have stored it
            conn.execute(
                "UPDATE messages AS r SET kind = 'rewind', "
                "data = jsonb_build_object('target_message_id', m.id) "
                "FROM messages AS m WHERE r.session_id = %s AND m.session_id = r.session_id "
                "AND m.kind = 'mark' AND r.id = m.id + 500",
                (sid,),
            )
            conn.execute("VACUUM ANALYZE messages")
        store.end_session(sid)
        return sid


def export_file(url: str, sid: int, path: Path) -> float:
    with ik.Store(url, pool_size=1) as store:
        t0 = time.perf_counter()
        store.export_session(sid, path)
        return time.perf_counter() - t0


def baseline_out(url: str, sid: int, path: Path) -> float:
    with psycopg.connect(url) as conn, conn.cursor() as cur, path.open("wb") as out:
        t0 = time.perf_counter()
        with cur.copy(BASELINE_OUT, (sid,)) as copy:
            for block in copy:
                out.write(block)
        return time.perf_counter() - t0


def import_file(url: str, path: Path) -> tuple[float, int]:
    with ik.Store(url, pool_size=1) as store:
        t0 = time.perf_counter()
        done = store.import_session(path)
        return time.perf_counter() - t0, done.session_id


def baseline_in(url: str, path: Path) -> float:
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute(PLAIN)
        cur.execute("TRUNCATE plain_events")
        conn.commit()
        t0 = time.perf_counter()
        with cur.copy("COPY plain_events FROM STDIN") as copy, path.open("rb") as src:
            while block := src.read(1 << 16):
                copy.write(block)
        conn.commit()
        return time.perf_counter() - t0


def insert_from_plain(url: str, sid: int) -> float:
    """The plain table's rows inserted into messages (then rolled back): the real table's cost."""
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        t0 = time.perf_counter()
        cur.execute(
            "INSERT INTO messages (session_id, kind, content, data, created_at) "
            "SELECT %s, kind, content, data, created_at FROM plain_events",
            (sid,),
        )
        elapsed = time.perf_counter() - t0
        conn.rollback()
        return elapsed


def peak_rss(url: str, *args: str) -> int:
    """Peak RSS in MiB of ``ikigai-store ARGS`` run as a child process."""
    env = {**os.environ, "IKIGAI_DATABASE_URL": url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ikigai_store", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        assert proc.stderr is not None
        raise RuntimeError(f"ikigai-store {' '.join(args)} failed: {proc.stderr.read()!r}")
    return int(usage.ru_maxrss // 1024)


def same_replay(source: str, sid: int, target: str, new_sid: int) -> bool:
    with ik.Store(source, pool_size=1) as a, ik.Store(target, pool_size=1) as b:
        x, y = a.replay_session(sid), b.replay_session(new_sid)
        return [(m.kind, m.content) for m in x.messages] == [
            (m.kind, m.content) for m in y.messages
        ] and len(x.marks) == len(y.marks)


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=1_000_000, help="the big session's size")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per measure (best of)")
    parser.add_argument("--quick", action="store_true", help="20,000 events, one round")
    args = parser.parse_args()
    events, rounds = (20_000, 1) if args.quick else (args.events, args.rounds)
    started = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    scratch = Scratch(server, "portability")
    rows: list[Row] = []
    try:
        source, target = scratch.create("source"), scratch.create("target")
        with step(f"fill a session of {events:,} events and one of {events // 10:,}"):
            big, small = fill(source, events), fill(source, events // 10)
        with tempfile.TemporaryDirectory() as tmp:
            ours, theirs = Path(tmp) / "ours.jsonl", Path(tmp) / "rows.copy"
            out: dict[str, list[float]] = {"ours": [], "copy": []}
            inn: dict[str, list[float]] = {"ours": [], "copy": [], "insert": []}
            for r in range(rounds):
                with step(f"round {r + 1}: export and COPY TO"):
                    out["ours"].append(export_file(source, big, ours))
                    out["copy"].append(baseline_out(source, big, theirs))
                with step(f"round {r + 1}: import and COPY FROM"):
                    seconds, new_sid = import_file(target, ours)
                    inn["ours"].append(seconds)
                    inn["copy"].append(baseline_in(target, theirs))
                    inn["insert"].append(insert_from_plain(target, new_sid))
            mb = ours.stat().st_size / 2**20
            o, c = min(out["ours"]), min(out["copy"])
            rows.append(
                Row(
                    f"export of {events:,} events ({mb:.0f} MiB) vs COPY TO STDOUT",
                    f"{o:.2f} s vs {c:.2f} s = {o / c:.2f}x",
                    "≤ 1.5x",
                    o / c <= 1.5,
                )
            )
            i, c, n = min(inn["ours"]), min(inn["copy"]), min(inn["insert"])
            rows.append(
                Row(
                    "import vs COPY FROM STDIN into a plain table",
                    f"{i:.2f} s vs {c:.2f} s = {i / c:.2f}x",
                    "≤ 2x",
                    i / c <= 2,
                )
            )
            rows.append(
                Row(
                    "info: the same rows INSERT-ed into messages (indexes, trigger, keys)",
                    f"{n:.2f} s = {n / c:.2f}x the COPY; import = {i / n:.2f}x this",
                    "",
                    None,
                )
            )
            with step("peak RSS of the CLI, small and big session"):
                small_file, big_file = Path(tmp) / "small.jsonl", Path(tmp) / "big.jsonl"
                rss = {
                    "export small": peak_rss(source, "export", str(small), "-o", str(small_file)),
                    "export big": peak_rss(source, "export", str(big), "-o", str(big_file)),
                    "import small": peak_rss(target, "import", str(small_file)),
                    "import big": peak_rss(target, "import", str(big_file)),
                }
            for verb in ("export", "import"):
                a, b = rss[f"{verb} small"], rss[f"{verb} big"]
                rows.append(
                    Row(
                        f"peak RSS of `ikigai-store {verb}`, {events // 10:,} vs {events:,}",
                        f"{a} MiB vs {b} MiB",
                        "constant",
                        b <= a * 1.2 + 5,
                    )
                )
            with step("the small session imported replays like the original"):
                _, copy_sid = import_file(target, small_file)
                ok = same_replay(source, small, target, copy_sid)
            rows.append(Row("import replays like the export", str(ok), "True", ok, check=True))
    finally:
        scratch.drop_all()
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"\n(this script's own peak RSS: {usage} MiB)")
    return summary(rows, started)


if __name__ == "__main__":
    run(main)
