"""Benchmark report: a review decision (issue 10) against a bare UPDATE measured in the same run.

Usage: ``python scripts/bench_reviews.py [--database URL] [--quick]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server; set ``IKIGAI_DATA_DIR`` to
run the embedded server on a private data directory).

What a decision costs. ``store.reviews.approve(review_id)`` moves a review from under_review to
approved and, in the same statement and transaction, writes the decision mail to the requester
(a mail row and its recipient row, whose trigger NOTIFYs the recipient) and the
``review_approved`` activity: one round trip, one commit. The baseline is the least any
decision can cost: ``UPDATE reviews SET state = 'approved', updated_at = now(), completed_at =
now() WHERE review_id = %s`` alone, in its own autocommit transaction, on its own connection to
the same database (same table, same indexes). Every call of either side acts on a fresh review
in under_review: one review per call and side (warm-up included) is created up front in bulk,
so all sides update comparable rows of one table and no call repeats a row. Per-call
mean, p50 and p90 in microseconds; goal: ratio of p50s <= 3. For information, a third side runs
the library's own ``review_fire`` statement raw with psycopg (what validation, the operation
driver and building the ``Review`` add), and ``record_iteration(..., "approve", ...)`` with two
issues (an iteration and its issues on top of a decision) is timed against the same baseline.

Invariants: nothing is asserted on timings (a report: the exit status is non-zero only on
errors or a failed correctness check, here that every decision wrote exactly one mail, one
recipient row and one activity, and the bare UPDATEs none); the sides alternate after warm-up
(the first side rotating every round, see ``benchkit.interleaved``), so load from other
processes hits every side alike. All data lives in a scratch database
``ikigai_bench_<pid>_reviews_decide`` on the server of the URL, dropped at the end, even on
failure. A markdown table (measure, result, goal, met?) ends the report. ``--quick``: a smoke
run of a few seconds (4 rounds of 50 calls instead of 20 of 100).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import psycopg
from benchkit import (
    Row,
    Scratch,
    Timings,
    arguments,
    environment,
    interleaved,
    pct,
    register,
    run,
    server_url,
    step,
    summary,
    us,
)

import ikigai_store as ik
from ikigai_store.reviews import fire_parameters

GOAL = 3.0
_BARE_UPDATE = (
    "UPDATE reviews SET state = 'approved', updated_at = now(), completed_at = now() "
    "WHERE review_id = %s"
)
_BULK_REVIEWS = """
INSERT INTO reviews (review_id, requester_id, reviewers, branch, commit_sha, state)
SELECT gen_random_uuid(), %(requester)s, ARRAY['reviewer'], 'feature/bench-' || n,
       md5(n::text), 'under_review'
FROM generate_series(1, %(n)s) AS n
RETURNING review_id
"""
_COUNTS = """
SELECT (SELECT count(*) FROM mail) AS mail,
       (SELECT count(*) FROM mail_recipients) AS recipients,
       (SELECT count(*) FROM activities) AS activities,
       (SELECT count(*) FROM reviews WHERE state = 'approved') AS approved
"""
ISSUES = [
    {
        "issue_type": "bug",
        "severity": "high",
        "title": "off by one",
        "description": "The loop skips the last element.",
        "file_path": "src/parse.c",
        "line_start": 120,
        "line_end": 124,
    },
    {
        "issue_type": "style",
        "severity": "low",
        "title": "long line",
        "description": "Wrap at 100 columns.",
        "file_path": "src/parse.c",
        "line_start": 8,
    },
]


def _pool(url: str, requester_id: int, n: int) -> Iterator[str]:
    """``n`` fresh reviews in under_review (bulk SQL), handed out one by one."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(_BULK_REVIEWS, {"requester": requester_id, "n": n}).fetchall()
        conn.execute("VACUUM ANALYZE reviews")
    return iter(str(r[0]) for r in rows)


def _counts(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.cursor(row_factory=psycopg.rows.dict_row)
        row = cur.execute(_COUNTS).fetchone()
    assert row is not None
    return {k: int(v) for k, v in row.items()}


def bench_decision(scratch: Scratch, rounds: int, per_round: int) -> list[Row]:
    print("\n[1] approve (state change + mail + activity, one statement) vs a bare UPDATE")
    url = scratch.create("decide")
    ids = register(url, "requester", "reviewer")
    warmup = 50
    calls = warmup + rounds * per_round
    with step(f"{4 * calls} reviews in under_review (bulk INSERT, then VACUUM ANALYZE)"):
        for_ours = _pool(url, ids["requester"], calls)
        for_bare = _pool(url, ids["requester"], calls)
        for_stmt = _pool(url, ids["requester"], calls)
        for_iter = _pool(url, ids["requester"], calls)
    fire_sql = ik.queries.review_fire.sql
    before = _counts(url)
    with (
        ik.Store(url, pool_size=1) as store,
        psycopg.connect(url, autocommit=True) as bare,
        psycopg.connect(url, autocommit=True) as stmt,
    ):

        def ours() -> None:
            store.reviews.approve(next(for_ours))

        def baseline() -> None:
            bare.execute(_BARE_UPDATE, (next(for_bare),))

        def own_statement() -> None:
            stmt.execute(fire_sql, fire_parameters(next(for_stmt), "approve", None)).fetchone()

        def iteration() -> None:
            store.reviews.record_iteration(
                next(for_iter), "reviewer", "approve", "Looks good.", issues=ISSUES
            )

        sides: dict[str, Callable[[], object]] = {
            "approve": ours,
            "bare UPDATE": baseline,
            "review_fire SQL": own_statement,
            "record_iteration": iteration,
        }
        with step(f"{rounds} rounds x {per_round} calls x {len(sides)} sides"):
            t = interleaved(sides, rounds=rounds, per_round=per_round, warmup=warmup)
    after = _counts(url)
    for side in t.calls:
        print(f"    {side:<17}: {t.line(side)}")
    print(
        f"    approve / bare UPDATE: {t.ratio('approve', 'bare UPDATE'):.3f}x; "
        f"{t.round_ratios('approve', 'bare UPDATE')}"
    )
    decided = 3 * calls  # approve, its raw statement and record_iteration each mail once
    written = {k: after[k] - before[k] for k in after}
    correct = written == {
        "mail": decided,
        "recipients": decided,
        "activities": decided,
        "approved": 4 * calls,
    }
    print(
        f"    written: {written} (expected {decided} mails, recipient rows and activities, "
        f"{4 * calls} approved reviews)"
    )
    return _rows(t, correct)


def _rows(t: Timings, correct: bool) -> list[Row]:
    def p50(side: str) -> str:
        return us(t.p50(side))

    r = t.ratio("approve", "bare UPDATE")
    return [
        Row(
            "approve (state + mail + activity) vs bare UPDATE, p50",
            f"p50 {p50('approve')} vs {p50('bare UPDATE')} = {r:.2f}x",
            f"≤ {GOAL:g}x",
            r <= GOAL,
        ),
        Row(
            "same, p90",
            f"{us(pct(t.calls['approve'], 0.9))} vs {us(pct(t.calls['bare UPDATE'], 0.9))}",
            "(report)",
            None,
        ),
        Row(
            "approve vs its own review_fire statement run raw, p50",
            f"{t.ratio('approve', 'review_fire SQL'):.2f}x (statement {p50('review_fire SQL')})",
            "(report)",
            None,
        ),
        Row(
            "record_iteration(approve, 2 issues) vs bare UPDATE, p50",
            f"{p50('record_iteration')} = {t.ratio('record_iteration', 'bare UPDATE'):.2f}x",
            "(report)",
            None,
        ),
        Row(
            "every decision wrote 1 mail + 1 recipient + 1 activity; bare UPDATEs none",
            "yes" if correct else "NO",
            "exact",
            correct,
            check=True,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: 4 rounds of 50 calls")
    args = parser.parse_args(argv)
    quick: bool = args.quick

    t0 = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    scratch = Scratch(server, "reviews")
    rows: list[Row] = []
    try:
        rows += bench_decision(scratch, rounds=4 if quick else 20, per_round=50 if quick else 100)
    finally:
        scratch.drop_all()
    return summary(rows, t0)


if __name__ == "__main__":
    run(main)
