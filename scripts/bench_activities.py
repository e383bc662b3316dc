"""Benchmark report: the activity feed, leases and context summaries (issue 10), against
baselines measured in the same run.

Usage: ``python scripts/bench_activities.py [--database URL] [--quick] [--leases-only]`` (with
no URL: ``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server; set
``IKIGAI_DATA_DIR`` to run the embedded server on a private data directory). ``--leases-only``
runs measurement 2 alone, with 80 rounds (issue 38).

Three measurements:

1. ``store.activities.feed`` (50 newest) on a table of 500,000 activities (``--quick``: 100,000)
   written by 50 identities with 16 types (one identity writes 0.2% of the rows, one type
   0.5%), vs the same calls on a table of 25,000 (same mix, so the rare identity still fills
   a page): unfiltered, by the rare identity, by the rare type, since the last hour, and page
   50 of the unfiltered feed reached through ``before`` (keyset). Calls alternate after
   warm-up (more than psycopg's 5 executions, so the server-side prepared statement may switch
   to a generic plan: what a long-lived store sees). Goal: big/small p50 <= 2 for every shape
   (the cost follows the page, not the table). The plans on the big table are printed and
   checked: no sequential scan of activities, and no sort except for the short ``since``
   window (the planner may read that window by created_at and sort its few rows).
2. ``store.leases.acquire`` + ``release`` of a free resource (two statements) vs a bare
   ``INSERT ... RETURNING`` + ``DELETE`` on a plain table with a unique key (two statements),
   on a table holding 1,000 other live leases: p50 ratio (goal <= 1.4, issue 38; issue 22: the
   exclusion constraint, the holder's foreign key, the sweep and the notification are what ours
   adds), with the per-round ratios (their spread is the noise).
   And 32 threads racing for one resource: the wall time until all 32 know the outcome (info),
   with the check that exactly one won.
3. ``store.summaries.add_context_summary`` (advisory lock, visibility-checked insert, prune to
   5: one transaction) vs ``add_summary`` (one insert): p50 ratio (info).

Nothing is asserted on timings (the exit status is non-zero only on errors or a failed
correctness check: the plans, the race). All data lives in scratch databases
``ikigai_bench_<pid>_activities_<role>``, dropped at the end.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import timedelta
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
from ikigai_store.leases import SWEEP_EVERY

IDENTITIES = 50
TYPES = ik.ACTIVITY_TYPES
RARE_IDENTITY = "writer-rare"
RARE_TYPE = "blocker"
#: Rows of the small table: enough for a full page of the rare identity (every 500th row).
SMALL = 25_000

#: Rows of the bulk insert: "writer-rare" on every 500th row, type "blocker" on every 200th,
#: created over the last 30 days in id order.
FILL = """
INSERT INTO activities (identity_id, type, description, metadata, created_at)
SELECT CASE WHEN g %% 500 = 0 THEN w.rare ELSE w.ids[1 + g %% array_length(w.ids, 1)] END,
       CASE WHEN g %% 200 = 0 THEN 'blocker'
            ELSE (ARRAY['commit', 'message', 'heartbeat', 'decision', 'error',
                        'task_complete', 'review_requested', 'plan_submitted'])[1 + g %% 8] END,
       'did thing ' || g, CASE WHEN g %% 3 = 0 THEN jsonb_build_object('n', g) END,
       ikigai_now() - interval '30 days' + (interval '30 days' / %(n)s) * g
FROM generate_series(1, %(n)s) AS g,
     (SELECT array_agg(id ORDER BY name) FILTER (WHERE name <> 'writer-rare') AS ids,
             max(id) FILTER (WHERE name = 'writer-rare') AS rare
      FROM identities WHERE name LIKE 'writer-%%') AS w
"""


def fill(url: str, n: int) -> None:
    names = [RARE_IDENTITY] + [f"writer-{k:02d}" for k in range(IDENTITIES - 1)]
    register(url, *names)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(FILL, {"n": n})
        conn.execute("VACUUM ANALYZE activities")


def feed_calls(store: ik.Store, page50_before: int) -> dict[str, Any]:
    return {
        "unfiltered": lambda: store.activities.feed(),
        "rare identity": lambda: store.activities.feed(identity=RARE_IDENTITY),
        "rare type": lambda: store.activities.feed(activity_type=RARE_TYPE),
        "last hour": lambda: store.activities.feed(since=hour_ago(store)),
        "page 50": lambda: store.activities.feed(before=page50_before),
    }


_HOUR_AGO: dict[int, Any] = {}


def hour_ago(store: ik.Store) -> Any:
    """The database's now minus one hour (read once per store)."""
    key = id(store)
    if key not in _HOUR_AGO:
        with store._connection() as conn:
            row = conn.execute("SELECT ikigai_now() - interval '1 hour' AS t").fetchone()
        assert row is not None
        _HOUR_AGO[key] = row["t"]
    return _HOUR_AGO[key]


def page50(store: ik.Store) -> int:
    before = None
    for _ in range(49):
        page = store.activities.feed(before=before)
        before = page[-1].id
    assert before is not None
    return before


def plans(url: str, store: ik.Store, before: int) -> tuple[bool, list[str]]:
    """EXPLAIN of each shape's query on the big table: ok when none sorts or scans
    activities sequentially."""
    window = {"since": None, "before": None, "limit": 50}
    shapes = {
        "unfiltered": ("activities_feed", {}),
        "rare identity": ("activities_feed_identity", {"identity": RARE_IDENTITY}),
        "rare type": ("activities_feed_type", {"type": RARE_TYPE}),
        "last hour": ("activities_feed", {"since": hour_ago(store)}),
        "page 50": ("activities_feed", {"before": before}),
    }
    ok, out = True, []
    with psycopg.connect(url) as conn:
        for name, (query, params) in shapes.items():
            sql = "EXPLAIN (COSTS OFF) " + getattr(ik.queries, query).sql
            lines = [str(r[0]) for r in conn.execute(sql, {**window, **params}).fetchall()]
            text = "\n".join(lines)
            bad = "Seq Scan on activities" in text or (
                "Sort" in text and name != "last hour"  # a short window may be sorted
            )
            ok = ok and not bad
            out.append(f"  {name}: {'OK' if not bad else 'SORT OR SEQ SCAN'}")
            out += [f"      {line}" for line in lines]
    return ok, out


def bench_feed(scratch: Scratch, big_n: int, rounds: int, per_round: int) -> list[Row]:
    print(f"\n[1] activities.feed: {big_n:,} activities vs {SMALL:,}")
    urls = {}
    for role, n in (("big", big_n), ("small", SMALL)):
        with step(f"fill {role} ({n:,} rows) + VACUUM ANALYZE"):
            urls[role] = scratch.create(role)
            fill(urls[role], n)
    rows: list[Row] = []
    with ik.Store(urls["big"], pool_size=1) as big, ik.Store(urls["small"], pool_size=1) as small:
        before = {"big": page50(big), "small": page50(small)}
        sides = {}
        for role, store in (("big", big), ("small", small)):
            for shape, fn in feed_calls(store, before[role]).items():
                sides[f"{shape} / {role}"] = fn
        t = interleaved(sides, rounds=rounds, per_round=per_round, warmup=8)
        for side in t.calls:
            print(f"  {side:22}: {t.line(side)}")
        for shape in ("unfiltered", "rare identity", "rare type", "last hour", "page 50"):
            ratio = t.ratio(f"{shape} / big", f"{shape} / small")
            rows.append(
                Row(
                    f"feed {shape}, {big_n // 1000}k vs {SMALL // 1000}k rows, p50",
                    f"{us(t.p50(f'{shape} / big'))} vs {us(t.p50(f'{shape} / small'))} = "
                    f"{ratio:.2f}x",
                    "≤ 2x",
                    ratio <= 2,
                )
            )
        ok, lines = plans(urls["big"], big, before["big"])
        print("  plans on the big table (after the timed calls):")
        for line in lines:
            print(line)
        rows.append(
            Row(
                "feed plans (big table)",
                "index walks (a sort only of the short window)" if ok else "see log",
                "index-driven",
                ok,
                check=True,
            )
        )
    scratch.drop("big")
    scratch.drop("small")
    return rows


RAW = """
CREATE TABLE raw_leases (id bigserial PRIMARY KEY, resource text UNIQUE, holder_id bigint,
                         token uuid DEFAULT gen_random_uuid(), expires_at timestamptz)
"""


def race_once(
    store: ik.Store, names: list[str], resource: str
) -> tuple[list[ik.Lease], list[float]]:
    """Every name acquires ``resource`` at once (a thread each): the leases granted, and how
    long each attempt took to learn its outcome."""
    barrier = threading.Barrier(len(names))
    won: list[ik.Lease] = []
    done: list[float] = []

    def attempt(name: str) -> None:
        barrier.wait(30)
        t0 = time.perf_counter()
        with contextlib.suppress(ik.Conflict):
            won.append(store.leases.acquire(name, resource, ttl=60))
        done.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in names]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    return won, done


def bench_leases(scratch: Scratch, rounds: int, per_round: int) -> list[Row]:
    print("\n[2] leases.acquire + release vs a bare INSERT + DELETE; 32 racing acquirers")
    url = scratch.create("leases")
    names = [f"holder-{k:02d}" for k in range(32)]
    ids = register(url, *names)
    rows: list[Row] = []
    with ik.Store(url, pool_size=32) as store, psycopg.connect(url, autocommit=True) as raw:
        raw.execute(RAW)
        for k in range(1000):
            store.leases.acquire(names[k % 32], f"busy/{k}", ttl=timedelta(hours=1))
        counter = iter(range(10**9))

        def ours() -> None:
            lease = store.leases.acquire("holder-00", f"free/{next(counter) % 7}", ttl=30)
            store.leases.release(lease)

        def bare() -> None:
            raw.execute(
                "INSERT INTO raw_leases (resource, holder_id, expires_at) "
                "VALUES (%s, %s, now() + interval '30 seconds') RETURNING id, token",
                (f"free/{next(counter) % 7}", ids["holder-00"]),
            ).fetchone()
            raw.execute("DELETE FROM raw_leases")

        # Where the difference goes: the same two statements shapes on the leases table itself
        # (its holder foreign key, exclusion constraint and four indexes: the schema's floor),
        # and our two statements run raw (no library: its validation, pool and rows).
        floor_ = (
            "INSERT INTO leases (resource, holder_id, exclusive, expires_at) "
            "VALUES (%s, %s, true, now() + interval '30 seconds') "
            "ON CONFLICT DO NOTHING RETURNING id, token"
        )

        def table_floor() -> None:
            row = raw.execute(floor_, (f"free/{next(counter) % 7}", ids["holder-00"])).fetchone()
            assert row is not None
            raw.execute("DELETE FROM leases WHERE id = %s", (row[0],))

        # acquire's usual statement: the fast INSERT (leases_grant); one call in SWEEP_EVERY
        # runs the sweeping leases_acquire instead, as the library does.
        grant_sql: str = ik.queries.leases_grant.sql
        acquire_sql: str = ik.queries.leases_acquire.sql
        release_sql: str = ik.queries.leases_release.sql
        turns = iter(range(10**9))

        def our_sql() -> None:
            params = {
                "holder": "holder-00",
                "resource": f"free/{next(counter) % 7}",
                "exclusive": True,
                "ttl": timedelta(seconds=30),
            }
            sweeping = next(turns) % SWEEP_EVERY == 0
            row = raw.execute(acquire_sql if sweeping else grant_sql, params).fetchone()
            assert row is not None
            raw.execute(release_sql, {"resource": row[1], "token": row[4]}).fetchone()

        t = interleaved(
            {"acquire+release": ours, "bare": bare, "table floor": table_floor, "our SQL": our_sql},
            rounds=rounds * 2,
            per_round=per_round,
            warmup=10,
        )
        for side in t.calls:
            print(f"  {side:15}: {t.line(side)}")
        print(f"  library vs bare: {t.round_ratios('acquire+release', 'bare')}")
        print(f"  our SQL vs bare: {t.round_ratios('our SQL', 'bare')}")
        ratio = t.ratio("acquire+release", "bare")
        rows.append(
            Row(
                "lease anatomy, p50 vs bare: leases table's own INSERT + DELETE / our 2 statements "
                "raw / the library",
                f"{t.ratio('table floor', 'bare'):.2f}x / {t.ratio('our SQL', 'bare'):.2f}x / "
                f"{ratio:.2f}x",
                "info",
                None,
            )
        )
        rows.append(
            Row(
                "lease acquire + release vs bare INSERT + DELETE, p50",
                f"{us(t.p50('acquire+release'))} vs {us(t.p50('bare'))} = {ratio:.2f}x",
                "≤ 1.4x",
                ratio <= 1.4,
            )
        )
        walls, winners = [], []
        for race in range(5):
            won, done = race_once(store, names, f"race/{race}")
            walls.append(max(done))
            winners.append(len(won))
        print(
            f"  32 racers, slowest outcome per race: {', '.join(ms(w) for w in walls)}; "
            f"winners {winners}"
        )
        rows.append(
            Row(
                "32 racing acquirers: slowest outcome (median of 5 races)",
                ms(sorted(walls)[2]),
                "info",
                None,
            )
        )
        rows.append(
            Row(
                "32 racing acquirers: winners per race",
                str(winners),
                "exactly 1 each",
                winners == [1] * 5,
                check=True,
            )
        )
    scratch.drop("leases")
    return rows


def bench_context(scratch: Scratch, rounds: int, per_round: int) -> list[Row]:
    print("\n[3] add_context_summary (lock + checked insert + prune) vs add_summary")
    url = scratch.create("summaries")
    register(url, "summarised")
    with ik.Store(url, pool_size=1) as store:
        sid = store.create_session("bench")
        root = store.create_agent(sid).uuid
        for _ in range(3):
            root_ids = [store.append(sid, "user", f"m{n}", agent_uuid=root).id for n in range(50)]
            root = store.fork_agent(root).uuid
        mine = [store.append(sid, "user", f"c{n}", agent_uuid=root).id for n in range(200)]
        counter = iter(range(10**9))

        def context() -> None:
            k = next(counter)
            store.summaries.add_context_summary(root, "s", root_ids[k % 50], mine[k % 200], k)

        def plain() -> None:
            store.summaries.add("summarised", "s")

        t = interleaved(
            {"context": context, "plain": plain}, rounds=rounds, per_round=per_round, warmup=10
        )
        for side in t.calls:
            print(f"  {side:8}: {t.line(side)}")
        kept = len(store.summaries.context_summaries(root))
    ratio = t.ratio("context", "plain")
    scratch.drop("summaries")
    return [
        Row(
            "add_context_summary (depth 3 fork) vs add_summary, p50",
            f"{us(t.p50('context'))} vs {us(t.p50('plain'))} = {ratio:.2f}x",
            "info",
            None,
        ),
        Row("context summaries kept after the run", str(kept), "5", kept == 5, check=True),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: smaller, fewer rounds")
    parser.add_argument("--leases-only", action="store_true", help="only measurement 2")
    args = parser.parse_args(argv)
    quick: bool = args.quick
    t0 = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    scratch = Scratch(server, "activities")
    rows: list[Row] = []
    try:
        if not args.leases_only:
            rows += bench_feed(
                scratch,
                100_000 if quick else 500_000,
                rounds=4 if quick else 10,
                per_round=10 if quick else 20,
            )
        lease_rounds = 40 if args.leases_only else 4 if quick else 10
        rows += bench_leases(scratch, rounds=lease_rounds, per_round=20 if quick else 50)
        if not args.leases_only:
            rows += bench_context(scratch, rounds=4 if quick else 10, per_round=10 if quick else 25)
    finally:
        scratch.drop_all()
    return summary(rows, t0)


if __name__ == "__main__":
    run(main)
