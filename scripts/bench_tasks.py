"""Benchmark report: tasks (issue 10) against baselines measured in the same run.

Usage: ``python scripts/bench_tasks.py [--database URL] [--quick]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server; set ``IKIGAI_DATA_DIR`` to
run the embedded server on a private data directory).

One scratch database holds two task lists built with ``COPY`` (a few seconds): ``big``, 10,000
tasks with 20,000 dependency edges, and ``small``, 100 tasks with 200 edges. Each is a random
DAG (seeded): every edge goes from a task to one of lower index (``task i is blocked by task j
< i``), distinct pairs; statuses are mixed (40% completed, 5% deleted, 10% in_progress with an
owner, 45% pending of which a tenth have an owner), so about an eighth of a list is available.
Then ``VACUUM ANALYZE``.

Measurements (calls alternate between the sides, the first side rotating every round, after a
warm-up; per-call mean, p50, p90):

1. ``store.tasks.available`` of the big list vs the small list: the ratio of p50s, and the
   ratio per task returned (the work is proportional to the candidates, not to the list: the
   plan walks the list's pending unowned tasks in ``tasks_available_idx`` and probes
   ``task_deps_pkey`` and the blockers' primary keys). Also the same statement run raw
   (psycopg, no model building) on both lists, and its EXPLAIN (ANALYZE, BUFFERS) on the big
   list, checked to use ``tasks_available_idx`` and ``task_deps_pkey`` and no sequential scan
   of tasks or task_deps (a correctness check).
2. ``store.tasks.claim`` of distinct available tasks of the big list vs a bare ``UPDATE
   tasks SET updated_at = ... WHERE id = %s`` by primary key on the same table (raw psycopg):
   the guard (pending, unowned, nothing blocking, as a NOT EXISTS over task_deps) plus the
   returned task vs the cheapest write of a row. For information: a losing claim (``Conflict``:
   the claim and the statement saying why).
3. ``store.tasks.stats`` of the big list vs the small list (one query with FILTER, a pass
   over the list's tasks).
4. For information: ``upsert_task`` replacing the dependencies of an early task of the big list
   (the cycle check walks every task that depends on it, most of the list) vs an upsert without
   ``blocked_by``.
5. For information: the first completion of a task owned by an identity (``upsert_task(...,
   status="completed")``: the row locked first, the update, and its ``task_complete`` activity,
   one statement) vs the same upsert moving a task to in_progress (no activity), on fresh tasks
   of the big list; then ``release_task`` of the in_progress ones (its p50), checked to write
   exactly one activity per completion.

Invariants: nothing is asserted on timings (the exit status is non-zero only on errors or a
failed correctness check: the plan, and every claim won exactly once). All data lives in a
scratch database ``ikigai_bench_<pid>_tasks_lists`` on the server of the URL, dropped at the
end, even on failure. A markdown table (measure, result, goal, met?) ends the report.
``--quick``: a smoke run of about 20 s (fewer rounds).
"""

from __future__ import annotations

import random
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from benchkit import (
    Row,
    Scratch,
    arguments,
    environment,
    interleaved,
    ms,
    register,
    run,
    server_url,
    step,
    summary,
    us,
)

import ikigai_store as ik

BIG = ("big", 10_000, 20_000)
SMALL = ("small", 100, 200)
SEED = 20_240_610
#: (status, owned, weight) of a generated task.
MIX = [
    ("completed", False, 40),
    ("deleted", False, 5),
    ("in_progress", True, 10),
    ("pending", True, 4.5),
    ("pending", False, 40.5),
]
OWNER = "lead"


@dataclass
class Built:
    """A generated list: its name, task count, edge count, and what the generator expects
    available (computed from the generated rows, in Python)."""

    name: str
    tasks: int
    edges: int
    available: int


# ------------------------------------------------------------------------------------ data


def build_list(conn: psycopg.Connection[Any], name: str, n: int, edges: int) -> Built:
    """COPY a list of ``n`` tasks and ``edges`` distinct edges (i blocked by j < i)."""
    rng = random.Random(f"{SEED}-{name}")
    row = conn.execute(
        "INSERT INTO task_lists (list_id, owner_id) "
        "SELECT %s, id FROM identities WHERE name = %s RETURNING id",
        (name, OWNER),
    ).fetchone()
    assert row is not None
    list_pk = int(row[0])
    weights = [w for *_, w in MIX]
    picked = rng.choices(MIX, weights, k=n)
    with (
        conn.cursor() as cur,
        cur.copy(
            "COPY tasks (list_id, external_id, subject, description, metadata, status, owner, "
            "started_at, completed_at) FROM STDIN"
        ) as copy,
    ):
        for i, (status, owned, _) in enumerate(picked):
            owner = f"agent-{rng.randrange(8)}" if owned else None
            copy.write_row(
                (
                    list_pk,
                    str(i + 1),
                    f"Task {i + 1} of {name}",
                    "Port one module, run its tests, fix what breaks.",
                    '{"source": "bench"}',
                    status,
                    owner,
                    "2025-01-01T00:00:00Z" if status in ("in_progress", "completed") else None,
                    "2025-01-02T00:00:00Z" if status == "completed" else None,
                )
            )
    ids = {
        ext: int(tid)
        for ext, tid in conn.execute(
            "SELECT external_id, id FROM tasks WHERE list_id = %s", (list_pk,)
        ).fetchall()
    }
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < edges:
        i = rng.randrange(1, n)
        pairs.add((i, rng.randrange(0, i)))
    with (
        conn.cursor() as cur,
        cur.copy("COPY task_deps (list_id, task_id, blocked_by_id) FROM STDIN") as copy,
    ):
        for i, j in sorted(pairs):
            copy.write_row((list_pk, ids[str(i + 1)], ids[str(j + 1)]))
    blockers: dict[int, list[int]] = {}
    for i, j in pairs:
        blockers.setdefault(i, []).append(j)
    done = {i for i, (status, _, _) in enumerate(picked) if status in ("completed", "deleted")}
    available = sum(
        1
        for i, (status, owned, _) in enumerate(picked)
        if status == "pending" and not owned and all(j in done for j in blockers.get(i, []))
    )
    return Built(name, n, edges, available)


def populate(url: str) -> tuple[Built, Built]:
    register(url, OWNER)
    with psycopg.connect(url, autocommit=True) as conn:
        big = build_list(conn, *BIG)
        small = build_list(conn, *SMALL)
        conn.execute("VACUUM ANALYZE task_lists, tasks, task_deps")
    return big, small


# ------------------------------------------------------------------------------------ 1 available


def plan_of(url: str, list_id: str) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of available_tasks' statement (the last of three runs)."""
    sql = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + ik.queries.task_available_in_list.sql
    with psycopg.connect(url) as conn:
        lines: list[str] = []
        for _ in range(3):
            lines = [str(r[0]) for r in conn.execute(sql, {"list_id": list_id, **ANY}).fetchall()]
    return lines


def index_driven(plan: list[str]) -> tuple[bool, str]:
    """Whether the plan reads tasks through tasks_available_idx and probes task_deps' primary
    key, with no sequential scan of tasks or task_deps (task_lists, two rows here, may be)."""
    text = "\n".join(plan)
    seq = [line.strip() for line in plan if re.search(r"Seq Scan on (tasks|task_deps)\b", line)]
    ok = "tasks_available_idx" in text and "task_deps_pkey" in text and not seq
    why = "tasks_available_idx + task_deps_pkey" if ok else f"sequential scans: {seq}"
    return ok, why


#: available_tasks' project filter, off (the library passes None when no project is given).
ANY = {"project_key": None}


def bench_available(url: str, big: Built, small: Built, rounds: int, per_round: int) -> list[Row]:
    print("\n[1] available_tasks: 10,000 tasks / 20,000 edges vs 100 tasks / 200 edges")
    sql = ik.queries.task_available_in_list.sql
    with ik.Store(url, pool_size=1) as store, psycopg.connect(url, autocommit=True) as raw:
        got = {b.name: len(store.tasks.available(b.name)) for b in (big, small)}
        for b in (big, small):
            print(f"  {b.name}: {got[b.name]:,} available (generator expects {b.available:,})")
        t = interleaved(
            {
                "big": lambda: store.tasks.available("big"),
                "small": lambda: store.tasks.available("small"),
                "raw big": lambda: raw.execute(sql, {"list_id": "big", **ANY}).fetchall(),
                "raw small": lambda: raw.execute(sql, {"list_id": "small", **ANY}).fetchall(),
            },
            rounds=rounds,
            per_round=per_round,
            warmup=5,
        )
    for side in t.calls:
        print(f"  {side:9}: {t.line(side)}")
    plan = plan_of(url, "big")
    print("  EXPLAIN (ANALYZE, BUFFERS) of available_tasks on the big list:")
    for line in plan:
        print(f"    {line}")
    ok, why = index_driven(plan)
    ratio = t.ratio("big", "small")
    per_task = (t.p50("big") / got["big"]) / (t.p50("small") / got["small"])
    raw_ratio = t.ratio("raw big", "raw small")
    print(f"  ratio big/small p50 {ratio:.1f}x ({t.round_ratios('big', 'small')})")
    return [
        Row(
            f"available_tasks, 10k tasks / 20k edges ({got['big']:,} returned), p50 / p90",
            f"{ms(t.p50('big'))} / {ms(sorted(t.calls['big'])[int(0.9 * len(t.calls['big']))])}",
            "info",
            None,
        ),
        Row(
            f"available_tasks, 10k list vs 100 list ({got['small']} returned), p50",
            f"{ms(t.p50('big'))} vs {ms(t.p50('small'))} = {ratio:.1f}x",
            "info (grows with the rows returned)",
            None,
        ),
        Row(
            "available_tasks per task returned, 10k list vs 100 list",
            f"{us(t.p50('big') / got['big'])} vs {us(t.p50('small') / got['small'])} = "
            f"{per_task:.2f}x",
            "≤ 2x (cost follows the result, not the list)",
            per_task <= 2,
        ),
        Row(
            "available_tasks statement alone (raw psycopg), 10k vs 100 list, p50",
            f"{ms(t.p50('raw big'))} vs {ms(t.p50('raw small'))} = {raw_ratio:.1f}x",
            "info",
            None,
        ),
        Row("available_tasks plan on the 10k list", why, "index-driven", ok, check=True),
    ]


# ------------------------------------------------------------------------------------ 2 claim


def bench_claim(url: str, rounds: int, per_round: int) -> list[Row]:
    print("\n[2] claim_task (guarded UPDATE) vs a bare UPDATE by primary key, big list")
    with ik.Store(url, pool_size=1) as store, psycopg.connect(url, autocommit=True) as raw:
        free = [t.external_id for t in store.tasks.available("big")]
        need = rounds * per_round + 5
        if len(free) < need:
            raise RuntimeError(f"only {len(free)} available tasks for {need} claims")
        claims = iter(free)
        ids = [
            int(r[0])
            for r in raw.execute(
                "SELECT t.id FROM tasks AS t JOIN task_lists AS l ON l.id = t.list_id "
                "WHERE l.list_id = 'big' ORDER BY t.id"
            ).fetchall()
        ]
        rng = random.Random(SEED)
        won: list[str] = []

        def claim() -> None:
            won.append(store.tasks.claim("big", next(claims), "bench").external_id)

        def bare() -> None:
            raw.execute(
                "UPDATE tasks SET updated_at = ikigai_now() WHERE id = %s", (rng.choice(ids),)
            )

        t = interleaved(
            {"claim_task": claim, "bare UPDATE": bare},
            rounds=rounds,
            per_round=per_round,
            warmup=5,
        )
        lost: list[float] = []
        for ext in won[:50]:
            t0 = time.perf_counter()
            try:
                store.tasks.claim("big", ext, "someone else")
            except ik.Conflict:
                lost.append(time.perf_counter() - t0)
        in_progress = {
            str(r[0])
            for r in raw.execute(
                "SELECT t.external_id FROM tasks AS t JOIN task_lists AS l ON l.id = t.list_id "
                "WHERE l.list_id = 'big' AND t.owner = 'bench' AND t.status = 'in_progress'"
            ).fetchall()
        }
    for side in t.calls:
        print(f"  {side:11}: {t.line(side)}")
    print(f"  losing claim (Conflict): p50 {us(statistics.median(lost))} over {len(lost)} calls")
    ratio = t.ratio("claim_task", "bare UPDATE")
    once = len(won) == len(set(won)) == len(in_progress) and set(won) == in_progress
    return [
        Row(
            "claim_task on the 10k list vs bare UPDATE by id, p50",
            f"{us(t.p50('claim_task'))} vs {us(t.p50('bare UPDATE'))} = {ratio:.2f}x",
            "info",
            None,
        ),
        Row(
            "losing claim_task (Conflict naming the owner), p50",
            us(statistics.median(lost)),
            "info",
            None,
        ),
        Row(
            f"every claim won once ({len(won)} claims)",
            "yes" if once else "NO",
            "all in_progress, once",
            once,
            check=True,
        ),
    ]


# ------------------------------------------------------------------------------------ 3 stats


def bench_stats(url: str, rounds: int, per_round: int) -> list[Row]:
    print("\n[3] task_stats: 10k list vs 100 list (one query with FILTER)")
    with ik.Store(url, pool_size=1) as store:
        print(f"  big: {store.tasks.stats('big')}")
        print(f"  small: {store.tasks.stats('small')}")
        t = interleaved(
            {
                "big": lambda: store.tasks.stats("big"),
                "small": lambda: store.tasks.stats("small"),
            },
            rounds=rounds,
            per_round=per_round,
            warmup=5,
        )
    for side in t.calls:
        print(f"  {side:5}: {t.line(side)}")
    ratio = t.ratio("big", "small")
    return [
        Row(
            "task_stats, 10k list vs 100 list, p50",
            f"{ms(t.p50('big'))} vs {ms(t.p50('small'))} = {ratio:.1f}x",
            "info (one pass over the list)",
            None,
        )
    ]


# ------------------------------------------------------------------------------------ 4 upsert


def bench_upsert(url: str, rounds: int, per_round: int) -> list[Row]:
    print("\n[4] upsert_task replacing an early task's dependencies (cycle check) vs no deps")
    with ik.Store(url, pool_size=1) as store:
        early = store.tasks.get("big", "40")
        deps = list(early.blocked_by) or ["1"]
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "WITH RECURSIVE up(id) AS (SELECT id FROM tasks WHERE id = %s UNION "
                "SELECT d.task_id FROM up JOIN task_deps AS d ON d.blocked_by_id = up.id) "
                "SELECT count(*) - 1 FROM up",
                (early.id,),
            ).fetchone()
        dependents = int(row[0]) if row else 0
        print(f"  task 40 has {dependents:,} dependents (transitively); blocked_by {deps}")
        t = interleaved(
            {
                "with blocked_by": lambda: store.tasks.upsert("big", "40", blocked_by=deps),
                "without": lambda: store.tasks.upsert("big", "40", subject="Task 40 of big"),
            },
            rounds=rounds,
            per_round=per_round,
            warmup=3,
        )
    for side in t.calls:
        print(f"  {side:15}: {t.line(side)}")
    ratio = t.ratio("with blocked_by", "without")
    return [
        Row(
            f"upsert replacing deps of a task with {dependents:,} dependents vs no deps, p50",
            f"{ms(t.p50('with blocked_by'))} vs {ms(t.p50('without'))} = {ratio:.1f}x",
            "info (the walk visits the dependents)",
            None,
        )
    ]


# ------------------------------------------------------------------------------------ 5 complete


def bench_complete(url: str, rounds: int, per_round: int) -> list[Row]:
    print("\n[5] first completion (+ task_complete activity) vs a move to in_progress")
    need = rounds * per_round + 5
    with ik.Store(url, pool_size=1) as store:
        store.identities.register("finisher")
        for i in range(need):
            for prefix in ("c", "p"):
                store.tasks.upsert("big", f"{prefix}{i}", subject="fresh", owner="finisher")
        done, moved = iter(range(need)), iter(range(need))
        t = interleaved(
            {
                "complete": lambda: store.tasks.upsert("big", f"c{next(done)}", status="completed"),
                "in_progress": lambda: store.tasks.upsert(
                    "big", f"p{next(moved)}", status="in_progress"
                ),
            },
            rounds=rounds,
            per_round=per_round,
            warmup=5,
        )
        released: list[float] = []
        for i in range(need):
            t0 = time.perf_counter()
            store.tasks.release("big", f"p{i}", "finisher")
            released.append(time.perf_counter() - t0)
        completed = len(
            [x for x in store.tasks.list("big", status="completed") if x.subject == "fresh"]
        )
        recorded = len(
            store.activities.feed(identity="finisher", activity_type="task_complete", limit=need)
        )
    for side in t.calls:
        print(f"  {side:11}: {t.line(side)}")
    print(f"  release_task: p50 {us(statistics.median(released))} over {len(released)} calls")
    ratio = t.ratio("complete", "in_progress")
    once = completed == recorded == need
    return [
        Row(
            "first completion with its activity vs a move to in_progress, p50",
            f"{us(t.p50('complete'))} vs {us(t.p50('in_progress'))} = {ratio:.2f}x",
            "info (one statement each)",
            None,
        ),
        Row("release_task (guarded UPDATE), p50", us(statistics.median(released)), "info", None),
        Row(
            f"one task_complete activity per completion ({completed} completions)",
            f"{recorded} activities",
            "equal",
            once,
            check=True,
        ),
    ]


# ------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer rounds")
    args = parser.parse_args(argv)
    quick: bool = args.quick
    t0 = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    scratch = Scratch(server, "tasks")
    rows: list[Row] = []
    try:
        url = scratch.create("lists")
        with step("build 10k + 100 task lists (COPY) + VACUUM ANALYZE"):
            big, small = populate(url)
        rows += bench_available(url, big, small, rounds=4 if quick else 12, per_round=10)
        rows += bench_claim(url, rounds=4 if quick else 10, per_round=25 if quick else 50)
        rows += bench_stats(url, rounds=4 if quick else 12, per_round=10 if quick else 25)
        rows += bench_upsert(url, rounds=2 if quick else 6, per_round=10)
        rows += bench_complete(url, rounds=4 if quick else 10, per_round=25 if quick else 50)
    finally:
        scratch.drop_all()
    return summary(rows, t0)


if __name__ == "__main__":
    run(main)
