"""Benchmark report: the store against baselines measured in the same run, on the same server.

Usage: ``python scripts/bench.py [--database URL] [--quick] [--append-only]``

Three measurements, each a ratio against a baseline taken side by side (interleaved blocks, after
warm-up, so drift and cache state hit both sides alike):

1. ``Store.append`` latency vs a raw psycopg ``INSERT ... RETURNING`` into the same ``messages``
   table over an autocommit connection, same payloads (goal: median ratio <= 1.10, issue 22);
2. ``Store.replay_session`` of a session holding 100k history events, a ``clear`` and 1k live
   events vs replay of a 1k-event session with the same live events (goal <= 1.2); measured
   twice: live events right after the clear, and with another session's 100k events written
   between the clear and the live events (several agents sharing one database);
3. ``Store.search`` of a rare term in a 200k-message database vs a 2k-message one, the term
   occurring in 5 messages of each (goal <= 3), plus the EXPLAIN showing the GIN index drives
   the probe such a search runs (scripts/bench_search.py measures search in depth).

Invariants: nothing is asserted on timings (this is a report; the exit status is 0 whatever the
ratios, non-zero only on errors); all data lives in scratch databases named
``ikigai_bench_<pid>_<role>`` created on the server of ``--database`` (default: the embedded
server) and dropped at the end, even on failure. Bulk setup writes straight into ``messages`` with
``COPY`` (explicit ids, so rewinds point at real marks), then runs ``VACUUM ANALYZE``.
``--quick`` shrinks every size 10x for a smoke run (well under a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

import ikigai_store as ik
from ikigai_store.config import admin_url, redact
from ikigai_store.embedded import embedded_server_url
from ikigai_store.pool import create_database, drop_database

RARE_TERM = "quixotrine"

# Realistic-ish coding-agent vocabulary: prose, code identifiers, shell and file names.
_VOCABULARY = (
    "the a to of and in is it that for on with this be as are you can we not at or if function "
    "return value error file path test build run install config server client request response "
    "json parse string list dict index table query session message event replay search store "
    "append commit branch merge rebase diff patch python postgres psycopg pytest ruff mypy fix "
    "bug issue stack trace exception raise import module class method argument option flag "
    "timeout retry connection pool cursor transaction rollback savepoint migration schema column "
    "row select insert update delete where order limit join group having explain analyze vacuum "
    "cache memory thread async await loop callback handler logger debug warning info output input "
    "buffer socket port host user password token secret env variable default missing null none "
    "true false integer float boolean array object key field type check valid invalid refactor "
    "rename move copy remove add change update version release tag docs readme changelog license "
    "src lib tests scripts main util helpers models errors db cli sql yaml toml lock venv pip "
    "should would could maybe please thanks sure okay now then next first last done good better "
    "looks works fails passes line lines char width height size count total sum max min average"
)
_WORDS = _VOCABULARY.split()
_TOOLS = ("bash", "read_file", "write_file", "grep", "glob", "edit")


# ------------------------------------------------------------------------------------ statistics


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def p95(xs: list[float]) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


@dataclass
class Row:
    """One line of the final summary table."""

    metric: str
    baseline: float
    ours: float
    goal: float

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline


def interleaved(
    a: Callable[[], object],
    b: Callable[[], object],
    *,
    runs: int,
    block: int,
    warmup: int,
) -> tuple[list[float], list[float]]:
    """Time ``a`` and ``b`` ``runs`` times each, in alternating blocks (ABBA order), after warm-up.

    Returns the per-call wall times in seconds, ``(times_a, times_b)``.
    """
    clock = time.perf_counter
    for _ in range(warmup):
        a()
        b()
    times: dict[int, list[float]] = {0: [], 1: []}
    fns = (a, b)
    done = 0
    blk = 0
    while done < runs:
        n = min(block, runs - done)
        order = (0, 1) if blk % 2 == 0 else (1, 0)
        for which in order:
            fn, out = fns[which], times[which]
            for _ in range(n):
                t0 = clock()
                fn()
                out.append(clock() - t0)
        done += n
        blk += 1
    return times[0], times[1]


# ------------------------------------------------------------------------------------ data


def words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(lo, hi)))


Event = tuple[int, str, str | None, str | None]  # id, kind, content, data (JSON text)


def session_events(rng: random.Random, n: int, first_id: int) -> list[Event]:
    """``n`` events of a plausible agent conversation, with ids from ``first_id``.

    Turns are user -> (tool_call, tool_result)* -> assistant -> usage; a labelled mark every few
    turns, and now and then a rewind to a mark still on the stack (so replay honours it). The rng
    stream does not depend on ``first_id``: the same seed gives the same events at any offset.
    """
    events: list[Event] = []
    marks: list[int] = []  # ids of the marks on the replay stack
    turn = 0

    def add(kind: str, content: str | None, data: Any = None) -> int:
        eid = first_id + len(events)
        text = None if data is None else json.dumps(data)
        events.append((eid, kind, content, text))
        return eid

    while len(events) < n:
        turn += 1
        roll = rng.random()
        if turn % 8 == 0:
            label = f"checkpoint {turn}"
            marks.append(add("mark", label, {"label": label}))
        elif roll < 0.04 and marks:
            depth = rng.randrange(len(marks))
            target = marks[depth]
            del marks[depth + 1 :]
            add("rewind", f"rewind to mark {target}", {"target_message_id": target})
            continue
        add("user", words(rng, 5, 60))
        for call in range(rng.choice((0, 0, 1, 1, 2, 3))):
            tool = rng.choice(_TOOLS)
            call_id = f"call_{turn}_{call}"
            args = {"command": words(rng, 2, 8)}
            add("tool_call", f"{tool} {args['command']}", {"id": call_id, "name": tool, **args})
            output = words(rng, 10, 200)
            add(
                "tool_result",
                output,
                {"tool_call_id": call_id, "name": tool, "output": output, "success": True},
            )
        add("assistant", words(rng, 20, 300))
        add("usage", None, {"input_tokens": rng.randint(1000, 90000), "output_tokens": 400})
    del events[n:]  # rewinds only point backwards: truncation never leaves a dangling target
    return events


def copy_events(conn: psycopg.Connection[Any], session_id: int, events: list[Event]) -> None:
    with (
        conn.cursor() as cur,
        cur.copy("COPY messages (id, session_id, kind, content, data) FROM STDIN") as copy,
    ):
        for eid, kind, content, data in events:
            copy.write_row((eid, session_id, kind, content, data))


def new_session(conn: psycopg.Connection[Any], title: str) -> int:
    row = conn.execute("INSERT INTO sessions (title) VALUES (%s) RETURNING id", (title,)).fetchone()
    assert row is not None
    return int(row[0])


def finish_load(conn: psycopg.Connection[Any]) -> None:
    """Move the id sequence past the copied ids; VACUUM ANALYZE (steady state, fresh stats)."""
    conn.execute(
        "SELECT setval(pg_get_serial_sequence('messages', 'id'), "
        "(SELECT COALESCE(max(id), 0) + 1 FROM messages), false)"
    )
    conn.execute("VACUUM (ANALYZE) messages")
    conn.execute("VACUUM (ANALYZE) sessions")


# ------------------------------------------------------------------------------------ databases


class Scratch:
    """Scratch databases on one server; every one created is dropped by ``drop_all``."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.created: list[str] = []

    def create(self, role: str) -> str:
        name = f"ikigai_bench_{os.getpid()}_{role}"
        drop_database(self.server_url, name)
        create_database(self.server_url, name)
        self.created.append(name)
        return admin_url(self.server_url, name)

    def drop_all(self) -> None:
        for name in reversed(self.created):
            try:
                drop_database(self.server_url, name)
            except ik.IkigaiStoreError as exc:
                print(f"warning: could not drop scratch database {name}: {exc}", file=sys.stderr)
        self.created.clear()


@contextmanager
def step(what: str) -> Iterator[None]:
    print(f"  {what} ...", end="", flush=True)
    t0 = time.perf_counter()
    yield
    print(f" {time.perf_counter() - t0:.1f} s", flush=True)


# ------------------------------------------------------------------------------------ benchmarks

_RAW_INSERT = (
    "INSERT INTO messages (session_id, kind, content, data) VALUES (%s, %s, %s, %s) "
    "RETURNING id, session_id, kind, content, data, created_at"
)


def bench_append(scratch: Scratch, scale: float, stack: ExitStack) -> Row:
    print("\n[1] append latency vs raw psycopg INSERT ... RETURNING")
    url = scratch.create("append")
    store = stack.enter_context(ik.open(url))
    raw = stack.enter_context(psycopg.connect(url, autocommit=True))
    sid = store.create_session("bench append")

    rng = random.Random(1)
    sizes = (64, 512, 4096)  # content characters, cycled
    payloads: list[tuple[str, str, Any]] = []
    for i in range(64):
        content = words(rng, 200, 800)[: sizes[i % len(sizes)]]
        kind = ("user", "assistant", "tool_call", "tool_result")[i % 4]
        data: dict[str, object] | None = None
        if kind == "tool_call":
            data = {"id": f"call_{i}", "name": "bash", "command": content[:40]}
        elif kind == "tool_result":
            data = {"tool_call_id": f"call_{i}", "name": "bash", "output": "ok", "success": True}
        payloads.append((kind, content, data))
    ours_i = raw_i = 0

    def ours() -> None:
        nonlocal ours_i
        kind, content, data = payloads[ours_i % len(payloads)]
        ours_i += 1
        store.append(sid, kind, content, data)

    def baseline() -> None:
        nonlocal raw_i
        kind, content, data = payloads[raw_i % len(payloads)]
        raw_i += 1
        cur = raw.execute(_RAW_INSERT, (sid, kind, content, None if data is None else Jsonb(data)))
        cur.fetchone()

    runs = max(200, int(2000 * scale))
    with step(f"{runs} appends each, blocks of {max(20, runs // 20)}"):
        t_ours, t_base = interleaved(
            ours, baseline, runs=runs, block=max(20, runs // 20), warmup=max(20, runs // 10)
        )
    print(f"  raw INSERT: median {fmt_ms(median(t_base))}  p95 {fmt_ms(p95(t_base))}")
    print(f"  append    : median {fmt_ms(median(t_ours))}  p95 {fmt_ms(p95(t_ours))}")
    print(f"  p95 ratio : {p95(t_ours) / p95(t_base):.3f}x")
    return Row("append median latency", median(t_base), median(t_ours), 1.10)


def bench_replay(scratch: Scratch, scale: float, stack: ExitStack, *, interleaved_with: int) -> Row:
    """Replay a long-history session vs a short one with the same live events.

    ``interleaved_with``: events another session writes between the long session's clear and
    its live events (0: the live events directly follow the clear, as in the goal's scenario).
    """
    history, live = int(100_000 * scale), int(1_000 * scale)
    print(f"\n[2] replay: {history} history + clear + {live} live events vs a {live}-event session")
    if interleaved_with:
        print(f"    variant: another session wrote {interleaved_with} events after the clear")
    url = scratch.create(f"replay{interleaved_with}")
    store = stack.enter_context(ik.open(url))
    with step("populate (COPY) + VACUUM ANALYZE"), psycopg.connect(url, autocommit=True) as conn:
        big = new_session(conn, "bench replay: long history")
        small = new_session(conn, "bench replay: short")
        clear_id = history + 1
        copy_events(
            conn,
            big,
            [*session_events(random.Random(2), history, 1), (clear_id, "clear", None, None)],
        )
        if interleaved_with:
            other = new_session(conn, "bench replay: another agent")
            copy_events(
                conn, other, session_events(random.Random(5), interleaved_with, clear_id + 1)
            )
        live_start = clear_id + 1 + interleaved_with
        copy_events(conn, big, session_events(random.Random(3), live, live_start))
        copy_events(conn, small, session_events(random.Random(3), live, live_start + live))
        finish_load(conn)

    ctx_big, ctx_small = store.replay_session(big), store.replay_session(small)
    kinds = [m.kind for m in ctx_big.messages]
    if kinds != [m.kind for m in ctx_small.messages] or ctx_big.skipped or ctx_small.skipped:
        raise RuntimeError("setup error: the two sessions do not replay to the same shape")
    counts = {k: kinds.count(k) for k in sorted(set(kinds))}
    print(f"  both replay to {len(kinds)} messages, {len(ctx_big.marks)} marks on stack: {counts}")

    runs = max(10, int(30 * min(1.0, scale * 3)))
    with step(f"{runs} replays each"):
        t_big, t_small = interleaved(
            lambda: store.replay_session(big),
            lambda: store.replay_session(small),
            runs=runs,
            block=1,
            warmup=3,
        )
    print(f"  {live}-event session : median {fmt_ms(median(t_small))}  p95 {fmt_ms(p95(t_small))}")
    print(f"  long-history session: median {fmt_ms(median(t_big))}  p95 {fmt_ms(p95(t_big))}")
    with psycopg.connect(url) as conn:
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + ik.queries.session_live_events.sql,
            {"session_id": big},
        ).fetchall()
    print("  EXPLAIN (ANALYZE, BUFFERS) session_live_events, long-history session:")
    for (line,) in plan:
        print(f"    {line}")
    metric = f"replay {history}+{live} vs {live} events"
    if interleaved_with:
        metric += f" (+{interleaved_with} of another session)"
    return Row(metric, median(t_small), median(t_big), 1.2)


def bench_search(scratch: Scratch, scale: float, stack: ExitStack) -> tuple[Row, bool]:
    small_n, big_n = int(2_000 * scale), int(200_000 * scale)
    print(f"\n[3] rare-term search: {big_n} vs {small_n} messages, term in 5 messages each")
    stores: dict[int, ik.Store] = {}
    urls: dict[int, str] = {}
    per_session = max(100, min(1000, small_n))
    for n in (small_n, big_n):
        urls[n] = url = scratch.create(f"search{n}")
        stores[n] = stack.enter_context(ik.open(url))
        with step(f"populate {n} messages"), psycopg.connect(url, autocommit=True) as conn:
            rng = random.Random(4)
            next_id = 1
            # 5 spread-out user messages, the same texts in both databases (same snippet work)
            rare_at = [n * (2 * k + 1) // 10 for k in range(5)]
            text_rng = random.Random(5)
            rare_texts = [
                f"{words(text_rng, 20, 60)} {RARE_TERM} {words(text_rng, 5, 20)}" for _ in rare_at
            ]
            for s in range(0, n, per_session):
                sid = new_session(conn, f"bench search {s // per_session}")
                events = session_events(rng, min(per_session, n - s), next_id)
                for i, (eid, kind, _content, data) in enumerate(events):
                    if rare_at and s + i >= rare_at[0] and kind == "user":
                        events[i] = (eid, kind, rare_texts[len(rare_texts) - len(rare_at)], data)
                        rare_at.pop(0)
                copy_events(conn, sid, events)
                next_id += len(events)
            finish_load(conn)
            total = conn.execute("SELECT count(*) FROM messages").fetchone()
        hits = stores[n].search(RARE_TERM)
        if len(hits) != 5:
            raise RuntimeError(f"setup error: {len(hits)} hits for {RARE_TERM!r} in {total} rows")

    runs = max(15, int(50 * min(1.0, scale * 3)))
    with step(f"{runs} searches each"):
        t_big, t_small = interleaved(
            lambda: stores[big_n].search(RARE_TERM),
            lambda: stores[small_n].search(RARE_TERM),
            runs=runs,
            block=1,
            warmup=10,
        )
    print(f"  {small_n:>6} messages: median {fmt_ms(median(t_small))}  p95 {fmt_ms(p95(t_small))}")
    print(f"  {big_n:>6} messages: median {fmt_ms(median(t_big))}  p95 {fmt_ms(p95(t_big))}")

    # The step a rare term's search runs (queries/search.sql): the GIN index alone.
    params: dict[str, object] = {
        "query": RARE_TERM,
        "phrase": False,
        "session_id": None,
        "agent_uuid": None,
        "kinds": None,
        "since": None,
        "until": None,
        "hi": 2**62,
        "by_time": False,
        "at": None,
        "at_id": None,
        "need": 1000,
        "keep": 1000,
    }
    with psycopg.connect(urls[big_n]) as conn:
        plan = [
            line
            for (line,) in conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS) " + ik.queries.search_probe.sql, params
            ).fetchall()
        ]
    print(f"  EXPLAIN (ANALYZE, BUFFERS) search_probe on the {big_n}-message database:")
    for line in plan:
        print(f"    {line}")
    gin = any("idx_messages_search" in line for line in plan) and not any(
        "Seq Scan on messages" in line for line in plan
    )
    print(f"  GIN index drives the scan: {'yes' if gin else 'NO'}")
    row = Row(f"search rare term {big_n} vs {small_n}", median(t_small), median(t_big), 3.0)
    return row, gin


# ------------------------------------------------------------------------------------ report


def machine(server_url: str) -> None:
    with psycopg.connect(server_url) as conn:
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("server_version", "shared_buffers", "fsync", "synchronous_commit")
        }
    print("machine")
    print(f"  CPUs        : {os.cpu_count()} ({platform.machine()}, {platform.platform()})")
    print(f"  Python      : {platform.python_version()} ({platform.python_implementation()})")
    print(f"  psycopg     : {psycopg.__version__} (libpq {psycopg.pq.version()})")
    print(f"  ikigai_store: {ik.__version__}")
    print(
        f"  PostgreSQL  : {settings['server_version']} (shared_buffers {settings['shared_buffers']}"
        f", fsync {settings['fsync']}, synchronous_commit {settings['synchronous_commit']})"
    )
    print(f"  server      : {redact(server_url)}")


def summary(rows: list[Row], gin: bool | None, quick: bool) -> None:
    header = ("metric", "baseline", "ours", "ratio", "goal", "result")
    table = [
        (
            r.metric,
            fmt_ms(r.baseline),
            fmt_ms(r.ours),
            f"{r.ratio:.2f}x",
            f"<= {r.goal:.2f}x",
            "met" if r.ratio <= r.goal else "NOT MET",
        )
        for r in rows
    ]
    if gin is not None:
        table.append(("search plan uses GIN index", "", "", "", "yes", "met" if gin else "NOT MET"))
    widths = [max(len(str(c)) for c in col) for col in zip(header, *table, strict=True)]
    title = "summary (medians; --quick: sizes 10x smaller)" if quick else "summary (medians)"
    print(f"\n{title}")
    for i, line in enumerate((header, *table)):
        print("  " + "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database",
        metavar="URL",
        help="a PostgreSQL URL; scratch databases are created on its server (default: embedded)",
    )
    parser.add_argument("--quick", action="store_true", help="sizes 10x smaller (smoke run)")
    parser.add_argument(
        "--append-only", action="store_true", help="measure (1), append, only (full size)"
    )
    args = parser.parse_args(argv)
    scale = 0.1 if args.quick else 1.0

    t0 = time.perf_counter()
    server_url = args.database or embedded_server_url()
    machine(server_url)
    scratch = Scratch(server_url)
    rows: list[Row] = []
    gin: bool | None = None
    try:
        with ExitStack() as stack:
            rows.append(bench_append(scratch, scale, stack))
        if not args.append_only:
            with ExitStack() as stack:
                rows.append(bench_replay(scratch, scale, stack, interleaved_with=0))
            with ExitStack() as stack:
                other = int(100_000 * scale)
                rows.append(bench_replay(scratch, scale, stack, interleaved_with=other))
            with ExitStack() as stack:
                row, gin = bench_search(scratch, scale, stack)
                rows.append(row)
    finally:
        scratch.drop_all()
    summary(rows, gin, args.quick)
    print(f"\ntotal time {time.perf_counter() - t0:.1f} s; goals are targets, not assertions")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ik.IkigaiStoreError, psycopg.Error, RuntimeError) as exc:
        print(f"\nbench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
