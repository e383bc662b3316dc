"""The activity feed on both faces: recording, the newest-first keyset-paginated feed with its
filters, pruning by age, every type of the vocabulary, and bad input writing nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

import ikigai_store as ik
from tests.mailtools import EPOCH, Clock, rows

pytestmark = pytest.mark.db


@pytest.fixture
def clock(ikigai_store: Any) -> Clock:
    """ann and bob exist; the database clock stands at EPOCH."""
    for name in ("ann", "bob"):
        ikigai_store.identities.register(name)
    return Clock(ikigai_store, EPOCH)


def record(store: Any, who: str, kind: str, text: str, **kw: Any) -> ik.Activity:
    return store.activities.record(who, kind, text, **kw)  # type: ignore[no-any-return]


def test_record_returns_the_activity(ikigai_store: Any, clock: Clock) -> None:
    """record_activity stores identity, type, description, metadata and the database time."""
    got = record(ikigai_store, "ann", "commit", "fix parser", metadata={"sha": "abc", "n": [1]})
    assert (got.identity, got.type, got.description) == ("ann", "commit", "fix parser")
    assert got.metadata == {"sha": "abc", "n": [1]} and got.created_at == EPOCH
    bare = ikigai_store.activities.record(ikigai_store.identities.get("bob"), "heartbeat", "alive")
    assert bare.metadata is None and bare.id > got.id
    assert ikigai_store.activities.feed() == [bare, got]


def test_every_type_of_the_vocabulary_is_accepted(ikigai_store: Any, clock: Clock) -> None:
    """Each of ACTIVITY_TYPES can be recorded (the CHECK and the list agree), and the
    database's CHECK names exactly these types."""
    for kind in ik.ACTIVITY_TYPES:
        record(ikigai_store, "ann", kind, f"a {kind}")
    assert [a.type for a in ikigai_store.activities.feed(limit=100)] == list(
        reversed(ik.ACTIVITY_TYPES)
    )
    with ikigai_store._connection() as conn:
        check = conn.execute(
            "SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint "
            "WHERE conname = 'activities_type_check'"
        ).fetchone()["d"]
    listed = [part.split("'")[1] for part in check.split("ARRAY[", 1)[1].split(",")]
    assert listed == list(ik.ACTIVITY_TYPES)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "named"),
    [
        (("ann", "deploy", "x"), {}, ik.InvalidArgument, "review_requested"),  # lists them
        (("ann", "Commit", "x"), {}, ik.InvalidArgument, "type"),
        (("ann", None, "x"), {}, ik.InvalidArgument, "type"),
        (("ann", "commit", ""), {}, ik.InvalidArgument, "description"),
        (("ann", "commit", "x" * 10_001), {}, ik.InvalidArgument, "description"),
        (("ann", "commit", "a\x00b"), {}, ik.InvalidArgument, "NUL"),
        (("ann", "commit", 5), {}, ik.InvalidArgument, "description"),
        (("ann", "commit", "x"), {"metadata": [1, 2]}, ik.InvalidArgument, "JSON object"),
        (("ann", "commit", "x"), {"metadata": "text"}, ik.InvalidArgument, "JSON object"),
        (("ann", "commit", "x"), {"metadata": {"t": datetime.now()}}, ik.InvalidArgument, "JSON"),
        (("ann", "commit", "x"), {"metadata": {"n": float("nan")}}, ik.InvalidArgument, "JSON"),
        (("ann", "commit", "x"), {"metadata": {1: "a"}}, ik.InvalidArgument, "key"),
        (("bad name", "commit", "x"), {}, ik.InvalidArgument, "identity"),
        (("ghost", "commit", "x"), {}, ik.NotFound, "ghost"),
    ],
)
def test_bad_records_write_nothing(
    ikigai_store: Any,
    clock: Clock,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: type[Exception],
    named: str,
) -> None:
    """Each bad argument is a clear error naming it, and no activity is written."""
    with pytest.raises(error, match=named):
        ikigai_store.activities.record(*args, **kwargs)
    assert rows(ikigai_store, "activities") == 0


def test_a_retired_identity_records_nothing(ikigai_store: Any, clock: Clock) -> None:
    """A retired identity's activity is refused; its old activities stay in the feed."""
    old = record(ikigai_store, "bob", "session_complete", "done")
    ikigai_store.identities.retire("bob")
    with pytest.raises(ik.InvalidArgument, match="retired"):
        record(ikigai_store, "bob", "heartbeat", "still here")
    assert ikigai_store.activities.feed(identity="bob") == [old]


def test_feed_pages_newest_first_without_repeats(ikigai_store: Any, clock: Clock) -> None:
    """Pages of ``limit`` chained with ``before`` (an Activity or an id) visit every activity
    exactly once, newest first."""
    made = [record(ikigai_store, ("ann", "bob")[n % 2], "message", f"m{n}") for n in range(23)]
    pages, before = [], None
    while True:
        page = ikigai_store.activities.feed(limit=5, before=before)
        if not page:
            break
        pages.append(page)
        before = page[-1] if len(pages) % 2 else page[-1].id
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert [a.id for p in pages for a in p] == [a.id for a in reversed(made)]
    newer = record(ikigai_store, "ann", "message", "late")  # a new row does not shift pages
    assert ikigai_store.activities.feed(limit=2, before=pages[0][-1]) == pages[1][:2]
    assert ikigai_store.activities.feed(limit=1) == [newer]


def test_feed_filters(ikigai_store: Any, clock: Clock) -> None:
    """identity, type and since filter alone and together; since is inclusive and any time
    zone works; an unknown identity is NotFound."""
    a1 = record(ikigai_store, "ann", "commit", "c1")
    clock.advance(hours=1)
    b1 = record(ikigai_store, "bob", "commit", "c2")
    b2 = record(ikigai_store, "bob", "error", "boom")
    clock.advance(hours=1)
    a2 = record(ikigai_store, "ann", "error", "oops")
    feed = ikigai_store.activities.feed
    assert feed(identity="ann") == [a2, a1]
    assert feed(activity_type="commit") == [b1, a1]
    assert feed(identity="bob", activity_type="error") == [b2]
    assert feed(since=EPOCH + timedelta(hours=1)) == [a2, b2, b1]
    plus2 = timezone(timedelta(hours=2))
    assert feed(since=(EPOCH + timedelta(hours=2)).astimezone(plus2)) == [a2]
    assert feed(since=EPOCH + timedelta(hours=1), activity_type="error", identity="ann") == [a2]
    assert feed(since=EPOCH + timedelta(hours=3)) == []
    assert feed(identity=ikigai_store.identities.get("bob"), before=b2) == [b1]
    ikigai_store.identities.register("cat")
    assert feed(identity="cat") == []
    with pytest.raises(ik.NotFound, match="ghost"):
        feed(identity="ghost")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"since": datetime(2030, 1, 1)}, "timezone"),
        ({"since": "2030-01-01"}, "since"),
        ({"activity_type": "deploy"}, "activity_type"),
        ({"limit": 0}, "limit"),
        ({"limit": True}, "limit"),
        ({"before": 0}, "before"),
        ({"before": "5"}, "before"),
        ({"identity": "bad name"}, "identity"),
    ],
)
def test_bad_feed_arguments(
    ikigai_store: Any, clock: Clock, kwargs: dict[str, Any], named: str
) -> None:
    """Bad feed arguments are InvalidArgument naming them."""
    with pytest.raises(ik.InvalidArgument, match=named):
        ikigai_store.activities.feed(**kwargs)


def test_prune_deletes_what_is_older(ikigai_store: Any, clock: Clock) -> None:
    """prune deletes rows created more than older_than ago (exactly that old is
    kept) and returns how many."""
    old = record(ikigai_store, "ann", "commit", "old")
    clock.advance(days=10)
    mid = record(ikigai_store, "ann", "commit", "mid")
    clock.advance(days=5)
    new = record(ikigai_store, "bob", "commit", "new")
    assert ikigai_store.activities.prune(older_than=timedelta(days=5)) == 1
    assert ikigai_store.activities.feed() == [new, mid]
    assert ikigai_store.activities.prune(older_than=timedelta(days=30)) == 0
    assert ikigai_store.activities.prune(older_than=timedelta(0)) == 1  # new is not older
    clock.advance(microseconds=1)
    assert ikigai_store.activities.prune(older_than=timedelta(0)) == 1
    assert ikigai_store.activities.feed() == []
    assert old not in ikigai_store.activities.feed()
    for bad in [timedelta(days=-1), "5", None, timedelta(days=36501)]:
        with pytest.raises(ik.InvalidArgument, match="older_than"):
            ikigai_store.activities.prune(older_than=bad)


def test_feed_is_index_driven(ikigai_store: Any, clock: Clock) -> None:
    """Each shape of the feed reads one index backwards in the feed's order, never sorting:
    with sorts, bitmaps and sequential scans priced out the plan must still exist (on a table
    this small the planner would rather sort; scripts/bench_activities.py times a big one)."""
    record(ikigai_store, "ann", "commit", "x")
    window = {"since": None, "before": None, "limit": 50}
    shapes = [
        ("activities_feed", {}, "activities_pkey"),
        ("activities_feed_type", {"type": "commit"}, "activities_type_idx"),
    ]
    # One identity's feed is a function (migration 0033: the identity's id read first, so that
    # on Citus the read is routed): its statement's plan is the one auto_explain logs, where
    # the server has it (PostgreSQL's contrib; the embedded server has not).
    nested = [
        ("activities_feed_identity", {"identity": "ann"}, "activities_identity_idx"),
        (
            "activities_feed_identity_type",
            {"identity": "ann", "type": "commit"},
            "activities_identity_type_idx",
        ),
    ]
    with ikigai_store._connection() as conn:
        for setting in (
            "enable_seqscan",
            "enable_bitmapscan",
            "enable_sort",
            "enable_incremental_sort",
        ):
            conn.execute(f"SELECT set_config('{setting}', 'off', true)")
        for name, params, index in shapes:
            sql = getattr(ik.queries, name).sql
            plan = "\n".join(
                r["QUERY PLAN"]
                for r in conn.execute("EXPLAIN " + sql, {**window, **params}).fetchall()
            )
            assert f"Index Scan Backward using {index} on activities" in plan, plan
            assert "Sort" not in plan, plan
        if _auto_explain(conn):
            logged: list[str] = []
            driver = getattr(conn, "_conn", conn)  # the async face's connection under it

            def log(d: psycopg.errors.Diagnostic) -> None:
                logged.append(d.message_primary or "")

            driver.add_notice_handler(log)
            try:
                for name, params, index in nested:
                    logged.clear()
                    conn.execute(getattr(ik.queries, name).sql, {**window, **params}).fetchall()
                    plan = "\n".join(logged)
                    assert f"Index Scan Backward using {index} on activities" in plan, plan
                    assert "Sort" not in plan, plan
            finally:
                driver.remove_notice_handler(log)
        for setting in (
            "enable_seqscan",
            "enable_bitmapscan",
            "enable_sort",
            "enable_incremental_sort",
        ):
            conn.execute(f"SELECT set_config('{setting}', 'on', true)")


def _auto_explain(conn: Any) -> bool:
    """Log every nested statement's plan to this connection (LOG messages, until the
    transaction ends), when the server has auto_explain; False when it has not."""
    present = conn.execute(
        "SELECT (pg_stat_file((SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR')"
        " || '/auto_explain.so', true)).size IS NOT NULL AS present"
    ).fetchone()["present"]
    if not present:
        return False
    conn.execute("LOAD 'auto_explain'")
    for setting, value in (
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_nested_statements", "on"),
        ("client_min_messages", "log"),
    ):
        conn.execute("SELECT set_config(%s, %s, true)", (setting, value))
    return True


def test_times_come_from_the_database(ikigai_store: Any) -> None:
    """Without a test clock the activity's time is the database's now."""
    ikigai_store.identities.register("dan")
    got = record(ikigai_store, "dan", "session_start", "hello")
    assert abs((got.created_at - datetime.now(UTC)).total_seconds()) < 60


def test_the_activity_and_summary_inserts_raise_their_refusals(ikigai_db_url: str) -> None:
    """Raw SQL running activities_record or summaries_add (migration 0040) for a missing or
    retired identity gets an error, IK404 or IK400, with the library's message, and nothing is
    stored."""
    q = ik.queries
    with ik.Store(ikigai_db_url, pool_size=1) as store:  # committed: raw SQL sees it
        store.identities.register("gone-away")
        store.identities.retire("gone-away")
    activity = {"type": "decision", "description": "d", "metadata": None}
    summary = {"summary": "s", "delta": None, "transcript_hash": None, "cost_usd": None}
    cases = [
        (
            q.activities_record,
            {"identity": "nobody-here", **activity},
            "IK404",
            "identity 'nobody-here' does not exist",
        ),
        (
            q.activities_record,
            {"identity": "gone-away", **activity},
            "IK400",
            "identity 'gone-away' is retired: it records no activity",
        ),
        (
            q.summaries_add,
            {"identity": "nobody-here", **summary},
            "IK404",
            "identity 'nobody-here' does not exist",
        ),
        (
            q.summaries_add,
            {"identity": "gone-away", **summary},
            "IK400",
            "identity 'gone-away' is retired: it gets no new summaries",
        ),
    ]
    with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
        for query, params, state, message in cases:
            with pytest.raises(psycopg.Error) as raised:
                conn.execute(query.sql, params)
            assert (raised.value.sqlstate, raised.value.diag.message_primary) == (state, message)
    with ik.Store(ikigai_db_url, pool_size=1) as store:
        assert [a.type for a in store.activities.feed(identity="gone-away")] == []
        assert store.summaries.history("gone-away") == []
