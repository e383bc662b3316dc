"""Benchmark report: lineage replay of forked agents against the seed's per-ancestor loop.

Usage: ``python scripts/bench_agents.py [--database URL] [--quick]``

Two measurements, on lineages built through the store (``fork_agent`` + ``append``): a root agent
and a chain of forks, each agent holding 10 events of its own (a mark, a conversation turn with a
tool call, and on every 5th level a rewind to that level's mark) before its child is forked.

1. ``Store.replay_agent(leaf)`` at depth 100 vs the seed's loop (the C program's
   ``ik_agent_replay``), written here with raw psycopg: walk from the leaf, per ancestor one query
   for its row (parent_uuid, fork_message_id) and one for its newest clear <= the bound, then one
   query per range for its events in id order, then ``ikigai_store.replay.fold``. Both must give
   the same message ids before anything is timed. Goal: the store >= 10x faster (median).
   Followed by the anatomy of one replay (server time, row decoding, ``Message.from_row``,
   ``fold``, one round trip): the part both sides share bounds the ratio.
2. Statements sent per replay at depths 1, 10, 100 and 1000, counted by wrapping
   ``psycopg.Cursor.execute`` for the duration of one call (goal: 1 at every depth), next to the
   baseline loop's count, and the median replay time of both at each depth.

Invariants: nothing is asserted on timings (exit status 0 whatever the results, non-zero only on
errors); all data lives in one scratch database ``ikigai_bench_<pid>_agents`` on the server of
``--database`` (default: the embedded server), dropped at the end, even on failure. Timings are
interleaved (ABBA blocks, after warm-up), on the same server and connection settings (autocommit,
dict rows). ``--quick`` times fewer runs (a smoke run of a few seconds); sizes stay the same.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
from bench import Scratch, fmt_ms, interleaved, machine, median, p95, step
from psycopg.rows import dict_row, tuple_row

import ikigai_store as ik
from ikigai_store.embedded import embedded_server_url
from ikigai_store.replay import fold

DEPTHS = (1, 10, 100, 1000)
COMPARE_DEPTH = 100
EVENTS_PER_LEVEL = 10
GOAL_SPEEDUP = 10.0

Conn = psycopg.Connection[dict[str, Any]]


# ------------------------------------------------------------------------------------ data


def build_lineage(store: ik.Store, depth: int) -> str:
    """A session with a chain of ``depth`` agents (root first), 10 own events each; the leaf."""
    sid = store.create_session(f"bench agents: depth {depth}")
    agent = store.create_agent(sid, name="level 0", provider="bench", model="m")
    with store.transaction():
        for level in range(depth):
            if level:
                agent = store.fork_agent(agent.uuid, name=f"level {level}")
            mark = store.mark(agent.uuid, f"level {level}")
            turn: list[tuple[Any, ...]] = [
                ("user", f"level {level}: fix the failing test"),
                ("tool_call", "bash pytest -q", {"id": f"c{level}", "name": "bash"}),
                ("tool_result", "1 failed", {"tool_call_id": f"c{level}", "success": True}),
                ("assistant", "The fixture is stale; regenerating it."),
                ("user", "Go ahead"),
                ("assistant", "Done: 42 passed"),
                ("usage", None, {"input_tokens": 1000 + level, "output_tokens": 400}),
                ("user", "Next"),
            ]
            for kind, content, *data in turn:
                store.append(sid, kind, content, data[0] if data else None, agent_uuid=agent.uuid)
            if level % 5 == 4:
                rewind_data = {"target_message_id": mark.id, "target_label": mark.content}
                store.append(sid, "rewind", mark.content, rewind_data, agent_uuid=agent.uuid)
            else:
                store.append(sid, "assistant", "On it.", agent_uuid=agent.uuid)
    return agent.uuid


def finish_load(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("messages", "agents", "sessions"):
            conn.execute(f"VACUUM (ANALYZE) {table}")


# ------------------------------------------------------------------------------------ baseline

_AGENT_ROW = "SELECT parent_uuid, fork_message_id FROM agents WHERE uuid = %s"
_CLEAR_ANY = (
    "SELECT COALESCE(max(id), 0) AS id FROM messages WHERE agent_uuid = %s AND kind = 'clear'"
)
_CLEAR_UPTO = _CLEAR_ANY + " AND id <= %s"
_COLUMNS = "id, session_id, agent_uuid, kind, content, data, created_at"
_RANGE_OPEN = f"SELECT {_COLUMNS} FROM messages WHERE agent_uuid = %s AND id > %s ORDER BY id"
_RANGE = (
    f"SELECT {_COLUMNS} FROM messages WHERE agent_uuid = %s AND id > %s AND id <= %s ORDER BY id"
)


def seed_replay(conn: Conn, leaf: str) -> ik.ReplayContext:
    """The C program's lineage replay: 2 queries per ancestor for the walk, 1 per range."""
    ranges: list[tuple[str, int, int | None]] = []
    uuid: str | None = leaf
    bound: int | None = None
    while uuid is not None:
        row = conn.execute(_AGENT_ROW, (uuid,)).fetchone()
        if row is None:
            raise ik.NotFound(f"agent {uuid} does not exist")
        if bound is None:
            clear = conn.execute(_CLEAR_ANY, (uuid,)).fetchone()
        else:
            clear = conn.execute(_CLEAR_UPTO, (uuid, bound)).fetchone()
        start = int(clear["id"]) if clear else 0
        ranges.append((uuid, start, bound))
        if start:
            break
        uuid, bound = row["parent_uuid"], int(row["fork_message_id"])
    events: list[ik.Message] = []
    for uuid, start, end in reversed(ranges):
        # Decoded exactly as replay_agent decodes (binary, tuple rows), so the comparison
        # measures the statements, not two ways of building Message objects.
        with conn.cursor(row_factory=tuple_row, binary=True) as cur:
            if end is None:
                rows = cur.execute(_RANGE_OPEN, (uuid, start)).fetchall()
            else:
                rows = cur.execute(_RANGE, (uuid, start, end)).fetchall()
        events.extend(ik.Message(*r) for r in rows)
    return fold(events)


# ------------------------------------------------------------------------------------ measures


@contextmanager
def counting_statements() -> Iterator[list[str]]:
    """Record the SQL of every ``psycopg.Cursor.execute`` call made inside the block."""
    seen: list[str] = []
    original = psycopg.Cursor.execute

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(query))
        return original(self, query, *args, **kwargs)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        psycopg.Cursor.execute = original  # type: ignore[method-assign]


def count(fn: Callable[[], object]) -> int:
    with counting_statements() as seen:
        fn()
    return len(seen)


def timed(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of ``fn`` over ``runs`` calls, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return median(times)


def anatomy(raw: Conn, leaf: str, ours: float, base: float, quick: bool) -> None:
    """Where a replay's time goes: the statement, decoding, building Messages, folding."""
    sql = ik.queries.replay_agent_events.sql.rstrip().rstrip(";")
    params = {"agent_uuid": leaf}
    runs = 20 if quick else 100

    def fetch_rows() -> list[Any]:
        with raw.cursor(row_factory=tuple_row, binary=True) as cur:
            return cur.execute(sql, params).fetchall()

    rows = fetch_rows()
    messages = [ik.Message(*r) for r in rows]
    server = timed(lambda: raw.execute(f"SELECT count(*) FROM ({sql}) AS q", params), runs)
    fetch = timed(fetch_rows, runs)
    convert = timed(lambda: [ik.Message(*r) for r in rows], runs)
    folding = timed(lambda: fold(messages), runs)
    trip = timed(lambda: raw.execute("SELECT 1").fetchall(), runs * 10)
    statements = count(lambda: seed_replay(raw, leaf))
    shared = (fetch - server) + convert + folding
    print(f"  anatomy of one replay ({len(rows)} rows), medians:")
    print(f"    statement run on the server, count(*) only : {fmt_ms(server)}")
    print(f"    + rows sent and decoded (binary, tuples)   : {fmt_ms(fetch - server)}")
    print(f"    + Message objects built                    : {fmt_ms(convert)}")
    print(f"    + fold                                     : {fmt_ms(folding)}")
    print(f"    one round trip (SELECT 1)                  : {fmt_ms(trip)}")
    extra = statements - 1
    remote = 5e-4  # a typical same-region network round trip
    print(f"  both sides decode, convert and fold the same rows in Python: {fmt_ms(shared)}")
    print(
        f"  the seed loop's {extra} extra statements cost {fmt_ms(base - ours)} here "
        f"({fmt_ms((base - ours) / max(1, extra))} each)"
    )
    print(f"  ratio ceiling here, even if replay_agent's statement were free: {base / shared:.1f}x")
    seed_remote = base + statements * (remote - trip)
    ours_remote = ours + remote - trip
    print(
        f"  projection, not measured: with a {fmt_ms(remote)} round trip the seed loop takes "
        f"~{fmt_ms(seed_remote)} vs ~{fmt_ms(ours_remote)} ({seed_remote / ours_remote:.0f}x)"
    )


def bench(scratch: Scratch, quick: bool, stack: ExitStack) -> None:
    url = scratch.create("agents")
    store = stack.enter_context(ik.open(url))
    raw: Conn = stack.enter_context(psycopg.connect(url, autocommit=True, row_factory=dict_row))

    leaves: dict[int, str] = {}
    print(f"\nsetup: one lineage per depth, {EVENTS_PER_LEVEL} events per agent")
    for depth in DEPTHS:
        with step(f"depth {depth:>4}: {depth} agents, {depth * EVENTS_PER_LEVEL} events"):
            leaves[depth] = build_lineage(store, depth)
    with step("VACUUM ANALYZE"):
        finish_load(url)

    for depth, leaf in leaves.items():
        ours, base = store.replay_agent(leaf), seed_replay(raw, leaf)
        if ours.message_ids != base.message_ids or ours.marks != base.marks:
            raise RuntimeError(f"depth {depth}: replay_agent and the seed loop disagree")
        if len(store._replay_ranges(leaf)) != depth:
            raise RuntimeError(f"depth {depth}: expected {depth} ranges")
    print(
        "  replay_agent and the seed loop give identical message ids and marks at every depth "
        f"({', '.join(f'{d}: {len(store.replay_agent(leaves[d]).messages)}' for d in DEPTHS)} "
        "messages in context)"
    )

    leaf = leaves[COMPARE_DEPTH]
    print(f"\n[1] replay of a depth-{COMPARE_DEPTH} leaf: replay_agent vs the seed's loop")
    runs = 30 if quick else 200
    with step(f"{runs} replays each, blocks of {max(5, runs // 10)}"):
        t_ours, t_base = interleaved(
            lambda: store.replay_agent(leaf),
            lambda: seed_replay(raw, leaf),
            runs=runs,
            block=max(5, runs // 10),
            warmup=10,
        )
    speedup = median(t_base) / median(t_ours)
    print(f"  seed loop   : median {fmt_ms(median(t_base))}  p95 {fmt_ms(p95(t_base))}")
    print(f"  replay_agent: median {fmt_ms(median(t_ours))}  p95 {fmt_ms(p95(t_ours))}")
    verdict = "met" if speedup >= GOAL_SPEEDUP else "NOT MET"
    print(f"  speedup     : {speedup:.1f}x (goal >= {GOAL_SPEEDUP:.0f}x: {verdict})")

    anatomy(raw, leaf, median(t_ours), median(t_base), quick)

    print("\n[2] statements and time per replay, by lineage depth")
    rows: list[tuple[str, ...]] = []
    constant = True
    for depth, leaf in leaves.items():
        n_ours = count(lambda leaf=leaf: store.replay_agent(leaf))  # type: ignore[misc]
        n_base = count(lambda leaf=leaf: seed_replay(raw, leaf))  # type: ignore[misc]
        constant &= n_ours == 1
        n = (10 if quick else 40) if depth >= 1000 else (30 if quick else 200)
        t_ours, t_base = interleaved(
            lambda leaf=leaf: store.replay_agent(leaf),  # type: ignore[misc]
            lambda leaf=leaf: seed_replay(raw, leaf),  # type: ignore[misc]
            runs=n,
            block=max(1, n // 10),
            warmup=3,
        )
        rows.append(
            (
                str(depth),
                str(depth * EVENTS_PER_LEVEL),
                str(n_ours),
                str(n_base),
                fmt_ms(median(t_ours)),
                fmt_ms(median(t_base)),
                f"{median(t_base) / median(t_ours):.1f}x",
            )
        )
    header = ("depth", "events", "stmts ours", "stmts seed", "ours", "seed loop", "speedup")
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    for i, line in enumerate((header, *rows)):
        print("  " + "  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)))
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))
    print(
        f"  statements per replay_agent: {'1 at every depth (goal met)' if constant else 'NOT 1'}"
    )

    print("\nsummary (medians)")
    print(
        f"  depth-{COMPARE_DEPTH} replay speedup vs seed loop: {speedup:.1f}x "
        f"(goal >= {GOAL_SPEEDUP:.0f}x: {verdict}; see the anatomy for this machine's ceiling)"
    )
    counts = ", ".join(f"{r[0]}: {r[2]}" for r in rows)
    result = "met" if constant else "NOT MET"
    print(f"  statements per replay_agent by depth: {counts} (goal 1: {result})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database",
        metavar="URL",
        help="a PostgreSQL URL; the scratch database is created on its server (default: embedded)",
    )
    parser.add_argument("--quick", action="store_true", help="fewer timed runs (smoke run)")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    server_url = args.database or embedded_server_url()
    machine(server_url)
    scratch = Scratch(server_url)
    try:
        with ExitStack() as stack:
            bench(scratch, args.quick, stack)
    finally:
        scratch.drop_all()
    print(f"\ntotal time {time.perf_counter() - t0:.1f} s; goals are targets, not assertions")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ik.IkigaiStoreError, psycopg.Error, RuntimeError) as exc:
        print(f"\nbench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
