"""Benchmark report: search over a year of history (issue 11), against baselines in the same run.

Usage: ``python scripts/bench_search.py [--database URL] [--quick] [--runs N]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server; set ``IKIGAI_DATA_DIR`` to
run the embedded server on a private data directory).

Corpora: four scratch databases of 10k, 100k, 200k and 1M messages (``--quick``: 2k, 10k, 20k,
50k) of coding-agent text: words drawn from a Zipf distribution over a 20,000-word vocabulary
(real programming words first, so "review" is in ~94% of the messages, "parser" in ~3%), 10-300
words a message (5% of the tool results 20 times longer), sessions of 1000 messages with two
agents each, eight kinds in turn, created_at 30 s apart. Planted in each, at the same relative
places: the rare word "quixotrine" in 5 tool results of one agent of one session, and four
exact phrases (each once, one of them in the first 5% of the history). Loaded with COPY.

The 1M database is built the way an existing user gets there: loaded at migration 0014 (the old
expression index), searched once with the old query (the "before" row), then migrated to 0015
(timed: the migration cost per million rows) and vacuumed. The others are loaded at 0015.

Measures (p50 of interleaved calls, the side going first rotating every round):

1. common word ("review"), top 50 with snippets, 200k messages: ``store.search`` vs SQLite FTS5
   (``porter unicode61`` tokenizer, bm25, ``snippet()``) on the same texts in this process;
   goal <= 0.5x;
2. common word at 1M vs at 100k, ``store.search`` (rank order): goal <= 2x (bounded);
3. rare word at 1M vs at 10k: goal <= 1.5x;
4. the rare word filtered by its session / agent / kind at 1M vs unfiltered at 1M: goal <= 2x;
   for information the common word with the same filters and in recent order;
5. relevance at 1M: each planted phrase, queried as plain words, is in the top 3 (a check: a
   failure makes the exit status non-zero); for information where a phrase of the most common
   words lands.

Then EXPLAIN (ANALYZE, BUFFERS) of every statement one common-word and one rare-word search run
at 1M. Nothing is asserted on timings (a report; the exit status follows errors and the relevance
check). Scratch databases ``ikigai_bench_<pid>_search_<role>`` are dropped at the end, even on
failure. A markdown table (measure, result, goal, met?) ends the report.
"""

from __future__ import annotations

import random
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from benchkit import (
    Row,
    Scratch,
    arguments,
    environment,
    interleaved,
    ms,
    run,
    server_url,
    step,
    summary,
)
from psycopg.rows import dict_row

import ikigai_store as ik
from ikigai_store import ops
from ikigai_store.migrate import apply as migrate_apply
from ikigai_store.migrate import rollback as migrate_rollback

COMMON = "review"
RARE = "quixotrine"
PER_SESSION = 1000
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
KINDS = (
    "user",
    "assistant",
    "tool_call",
    "tool_result",
    "assistant",
    "tool_result",
    "user",
    "system",
)

# Real words first (the most frequent), then pronounceable made-up ones up to 20,000.
_REAL = """
review error test file build run install config server client request response json parse
string list dict index table query session message event replay search store append commit
branch merge rebase diff patch python postgres pytest fix bug issue stack trace exception raise
import module class method argument option flag timeout retry connection pool cursor transaction
rollback migration schema column row select insert update delete order limit join group explain
analyze vacuum cache memory thread async await loop callback handler logger debug warning output
input buffer socket port host user password token secret variable default missing null true false
integer float boolean array object key field type check valid invalid refactor rename move copy
remove add change version release tag docs readme changelog license source library tests scripts
main util helpers models errors cli yaml toml lock pip should would could maybe please thanks sure
okay now then next first last done good better looks works fails passes line lines char width
height size count total sum max min average parser lexer grammar compile linker header pointer
struct leak segfault crash core dump deploy staging production rollout canary metric alert
dashboard latency throughput queue worker job schedule cron backup restore snapshot replica
primary failover deadlock wait signal process
"""

#: Planted exact phrases (query, text planted), each once, at these fractions of the history.
PHRASES: tuple[tuple[str, str, float], ...] = (
    ("replica failover deadlock", "after the replica failover deadlock the queue stalled", 0.03),
    ("cursor leak in the worker pool", "found a cursor leak in the worker pool at last", 0.41),
    ("canary rollout latency alert", "the canary rollout latency alert fired twice", 0.77),
    ("segfault in the linker header", "bisected the segfault in the linker header", 0.96),
)
#: A phrase of the most common words only (reported, not a goal: see the README's limits).
COMMON_PHRASE = (
    "review the error in the test file",
    "please review the error in the test file",
    0.5,
)


def vocabulary(size: int, rng: random.Random) -> list[str]:
    words = list(dict.fromkeys(_REAL.split()))
    seen = set(words)
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    while len(words) < size:
        word = "".join(
            rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4))
        )
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


@dataclass(frozen=True)
class Planted:
    """Where the planted messages are in a corpus of ``n`` messages (ids from 1)."""

    n: int

    @property
    def rare_ids(self) -> list[int]:
        """Five tool results (id % 8 == 3 is tool_result) of agent 1 of one session."""
        session = max(1, (self.n // PER_SESSION) * 3 // 5)
        first = (session - 1) * PER_SESSION
        size = min(PER_SESSION, self.n - first)
        return [first + (size * k // 6) // 8 * 8 + 3 for k in range(1, 6)]

    def phrase_ids(self) -> dict[str, int]:
        out = {}
        for query, _text, where in (*PHRASES, COMMON_PHRASE):
            out[query] = int(self.n * where) // 8 * 8 + 1  # an assistant message
        return out


def corpus(n: int, seed: int = 7) -> Iterator[tuple[int, int, str, str, str, datetime]]:
    """(id, session id, agent uuid, kind, content, created_at) of the ``n``-message corpus."""
    rng = random.Random(seed)
    words = vocabulary(20_000, random.Random(seed + 1))
    weights, acc = [], 0.0
    for r in range(1, len(words) + 1):
        acc += 1.0 / r
        weights.append(acc)
    planted = Planted(n)
    rare = set(planted.rare_ids)
    phrases = {i: q for q, i in planted.phrase_ids().items()}
    texts = {q: t for q, t, _w in (*PHRASES, COMMON_PHRASE)}
    for i in range(1, n + 1):
        session = (i - 1) // PER_SESSION + 1
        kind = KINDS[i % len(KINDS)]
        length = min(300, int(rng.lognormvariate(3.6, 0.7)) + 10)
        if kind == "tool_result" and rng.random() < 0.05:
            length *= 20
        text = " ".join(rng.choices(words, cum_weights=weights, k=length))
        agent = f"agent-{session}-{1 if i in rare else i % 2}"
        if i in rare:
            text = f"{text} {RARE} {text[:80]}"
        if i in phrases:
            text = f"{text[:200]} {texts[phrases[i]]} {text[200:400]}"
        yield i, session, agent, kind, text, EPOCH + timedelta(seconds=30 * i)


def load(url: str, n: int) -> None:
    """COPY the ``n``-message corpus into an empty store, with its sessions and agents."""
    sessions = (n + PER_SESSION - 1) // PER_SESSION
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO sessions (id, title, started_at) SELECT g, 'bench ' || g, %s "
            "FROM generate_series(1, %s) AS g",
            (EPOCH, sessions),
        )
        conn.execute("SELECT setval(pg_get_serial_sequence('sessions', 'id'), %s)", (sessions,))
        conn.execute(
            "INSERT INTO agents (uuid, session_id) SELECT 'agent-' || g || '-' || a, g "
            "FROM generate_series(1, %s) AS g, generate_series(0, 1) AS a",
            (sessions,),
        )
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY messages (id, session_id, agent_uuid, kind, content, created_at) FROM STDIN"
            ) as copy,
        ):
            for row in corpus(n):
                copy.write_row(row)
        conn.execute("SELECT setval(pg_get_serial_sequence('messages', 'id'), %s)", (n,))


def settle(url: str) -> None:
    """What autovacuum does to a settled table: VACUUM (merges GIN's pending list) and ANALYZE."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) messages")
        conn.execute("VACUUM (ANALYZE) sessions")
        conn.execute("VACUUM (ANALYZE) agents")


def sizes(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT pg_size_pretty(pg_table_size('messages')), "
            "pg_size_pretty(pg_relation_size('idx_messages_search_vector'))"
        ).fetchone()
    assert row is not None
    return f"table {row[0]}, GIN index {row[1]}"


# ------------------------------------------------------------------------------------ old query

#: search_messages before issue 11 (queries/search.sql at 0.x): ranks every match by
#: re-parsing its content.
OLD_SEARCH = """
WITH q AS (SELECT websearch_to_tsquery('english', %(query)s) AS tsq),
hits AS (
    SELECT m.id, ts_rank_cd(to_tsvector('english', left(m.content, 100000)), q.tsq) AS rank
    FROM messages AS m, q
    WHERE to_tsvector('english', left(m.content, 100000)) @@ q.tsq
    ORDER BY rank DESC, m.id DESC
    LIMIT 50
)
SELECT m.id, hits.rank,
       ts_headline('english', left(m.content, 100000), q.tsq,
                   'StartSel=[, StopSel=], MaxWords=30, MinWords=10, MaxFragments=2') AS snippet
FROM hits JOIN messages AS m ON m.id = hits.id CROSS JOIN q
ORDER BY hits.rank DESC, m.id DESC
"""


def old_query_ms(url: str, query: str, runs: int) -> float:
    with psycopg.connect(url) as conn:
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            conn.execute(OLD_SEARCH, {"query": query}).fetchall()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ------------------------------------------------------------------------------------ FTS5


def fts5(n: int) -> sqlite3.Connection:
    """The same ``n`` texts in an in-memory SQLite FTS5 table (porter stemming, like 'english')."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize = 'porter unicode61')")
    db.executemany(
        "INSERT INTO t (rowid, content) VALUES (?, ?)",
        ((i, c) for i, _s, _a, _k, c, _t in corpus(n)),
    )
    db.execute("INSERT INTO t (t) VALUES ('optimize')")
    db.commit()
    return db


FTS5_TOP = (
    "SELECT rowid, bm25(t) AS score, snippet(t, 0, '[', ']', ' ... ', 30) FROM t "
    "WHERE t MATCH ? ORDER BY score LIMIT 50"
)


# ------------------------------------------------------------------------------------ timing


@dataclass
class Side:
    label: str
    call: Callable[[], object]


def compare(a: Side, b: Side, runs: int, what: str) -> tuple[float, float]:
    """p50 seconds of ``a`` and ``b``, interleaved (``runs`` rounds of 5 calls each)."""
    with step(f"{what}: {runs} rounds x 5 calls x 2 sides"):
        t = interleaved({a.label: a.call, b.label: b.call}, rounds=runs, per_round=5, warmup=5)
    return t.p50(a.label), t.p50(b.label)


def searcher(store: ik.Store, query: str, **kwargs: Any) -> Callable[[], object]:
    """A call of ``store.search(query, **kwargs)``."""
    return lambda: store.search(query, **kwargs)


def p50(call: Callable[[], object], runs: int) -> float:
    for _ in range(3):
        call()
    times = []
    for _ in range(runs * 5):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ratio_row(measure: str, ours: float, base: float, goal: float, labels: tuple[str, str]) -> Row:
    r = ours / base
    return Row(
        measure,
        f"{labels[0]} {ms(ours)} vs {labels[1]} {ms(base)} = {r:.2f}x",
        f"≤ {goal}x",
        r <= goal,
    )


# ------------------------------------------------------------------------------------ plans


def traced(store: ik.Store, query: str, **kwargs: Any) -> list[ops.Call]:
    """The statements one search runs (the operation's calls, in order)."""
    calls: list[ops.Call] = []
    execute = ops.execute

    def record(conn: psycopg.Connection[Any], call: ops.Call) -> Any:
        calls.append(call)
        return execute(conn, call)

    ops.execute = record
    try:
        store.search(query, **kwargs)
    finally:
        ops.execute = execute
    return calls


def explain(url: str, calls: list[ops.Call]) -> None:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        for call in calls:
            sql: str = getattr(ik.queries, call.name).sql
            shown = {k: v for k, v in call.params.items() if k not in ("ids", "phrase_ids")}
            print(f"\n    -- {call.name} {shown}")
            if sql.lstrip().upper().startswith("EXPLAIN"):
                print("    (an EXPLAIN itself: the planner's estimates, nothing runs)")
                continue
            for row in conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, dict(call.params)
            ).fetchall():
                print(f"    {row['QUERY PLAN']}")


# ------------------------------------------------------------------------------------ main


def build(scratch: Scratch, n: int, role: str) -> str:
    url = scratch.create(role)
    with step(f"load {n:,} messages at schema 15 (COPY; the trigger fills search_vector)"):
        load(url, n)
    with step("VACUUM ANALYZE"):
        settle(url)
    return url


def build_by_migration(scratch: Scratch, n: int, runs: int) -> tuple[str, list[Row]]:
    """The big corpus loaded at schema 14, searched the old way, then migrated (timed)."""
    url = scratch.create("big")
    migrate_rollback(url, count=1)
    with step(f"load {n:,} messages at schema 14 (COPY; the old expression index)"):
        load(url, n)
    with step("VACUUM ANALYZE"):
        settle(url)
    with step(f"old search query, common word, {runs} runs"):
        before = old_query_ms(url, COMMON, runs)
    t0 = time.perf_counter()
    with step("migrate to 0015 (column, trigger, batched fill, CONCURRENTLY indexes)"):
        applied = migrate_apply(url)
    took = time.perf_counter() - t0
    if applied != ["0015-search-stored-vectors"]:
        raise RuntimeError(f"expected to apply 0015 only, applied {applied}")
    with step("VACUUM ANALYZE"):
        settle(url)
    print(f"  {sizes(url)}")
    per_million = took / (n / 1e6)
    return url, [
        Row(
            f"migration 0015 on {n:,} messages (writers never wait for more than one batch)",
            f"{took:.0f} s = {per_million / 60:.1f} min per million messages",
            "(report)",
            None,
        ),
        Row(
            f"before: the old query, common word, top 50, {n:,} messages",
            ms(before),
            "(report)",
            None,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2k/10k/20k/50k messages")
    parser.add_argument("--runs", type=int, metavar="N", help="rounds per comparison (default 10)")
    args = parser.parse_args(argv)
    quick: bool = args.quick
    small, mid, fts_n, big = (
        (2_000, 10_000, 20_000, 50_000) if quick else (10_000, 100_000, 200_000, 1_000_000)
    )
    runs: int = args.runs or (4 if quick else 10)

    t_start = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    print(f"  SQLite      : {sqlite3.sqlite_version} (FTS5)")
    scratch = Scratch(server, "search")
    rows: list[Row] = []
    try:
        print(f"\n[setup] corpora of {small:,}, {mid:,}, {fts_n:,} and {big:,} messages")
        big_url, migration_rows = build_by_migration(scratch, big, max(1, runs // 5))
        urls = {
            "small": build(scratch, small, "small"),
            "mid": build(scratch, mid, "mid"),
            "fts": build(scratch, fts_n, "fts"),
        }
        with step(f"SQLite FTS5 table of the same {fts_n:,} texts"):
            lite = fts5(fts_n)
        stores = {k: ik.Store(u, pool_size=1) for k, u in urls.items()}
        stores["big"] = ik.Store(big_url, pool_size=1)
        try:
            rows += measure(stores, lite, runs, (small, mid, fts_n, big))
            print(
                "\n[plans] EXPLAIN (ANALYZE, BUFFERS) of the statements of a search at "
                f"{big:,} messages"
            )
            for query in (COMMON, RARE):
                print(f"\n  search({query!r}) runs:")
                explain(big_url, traced(stores["big"], query))
        finally:
            for store in stores.values():
                store.close()
        rows += migration_rows
    finally:
        scratch.drop_all()
    return summary(rows, t_start)


def measure(
    stores: Mapping[str, ik.Store], lite: sqlite3.Connection, runs: int, ns: tuple[int, ...]
) -> list[Row]:
    small, mid, fts_n, big = ns
    rows: list[Row] = []
    b = stores["big"]

    print(f"\n[1] common word {COMMON!r}, top 50 with snippets, {fts_n:,} messages")
    ours = stores["fts"].search(COMMON, limit=50)
    theirs = lite.execute(FTS5_TOP, (COMMON,)).fetchall()
    if len(ours) != 50 or len(theirs) != 50:
        raise RuntimeError(f"setup error: {len(ours)} and {len(theirs)} hits")
    matches = lite.execute("SELECT count(*) FROM t WHERE t MATCH ?", (COMMON,)).fetchone()[0]
    print(f"  {matches:,} of {fts_n:,} messages match")
    o, f = compare(
        Side("store.search", lambda: stores["fts"].search(COMMON, limit=50)),
        Side("FTS5 bm25", lambda: lite.execute(FTS5_TOP, (COMMON,)).fetchall()),
        runs,
        "interleaved",
    )
    rows.append(
        ratio_row(
            f"common word, top 50 + snippets, {fts_n:,} msgs, vs SQLite FTS5 bm25",
            o,
            f,
            0.5,
            ("ours", "FTS5"),
        )
    )

    print(f"\n[2] common word at {big:,} vs {mid:,} messages")
    o, f = compare(
        Side("big", lambda: b.search(COMMON)),
        Side("mid", lambda: stores["mid"].search(COMMON)),
        runs,
        "interleaved",
    )
    rows.append(
        ratio_row(
            f"common word, {big:,} vs {mid:,} messages",
            o,
            f,
            2,
            ("1M" if big == 1_000_000 else f"{big:,}", f"{mid:,}"),
        )
    )

    print(f"\n[3] rare word at {big:,} vs {small:,} messages")
    for store, n in ((b, big), (stores["small"], small)):
        found = sorted(h.message.id for h in store.search(RARE))
        if found != Planted(n).rare_ids:
            raise RuntimeError(f"setup error: {RARE!r} found in {found} at {n:,}")
    rare_big, rare_small = compare(
        Side("big", lambda: b.search(RARE)),
        Side("small", lambda: stores["small"].search(RARE)),
        runs,
        "interleaved",
    )
    rows.append(
        ratio_row(
            f"rare word, {big:,} vs {small:,} messages",
            rare_big,
            rare_small,
            1.5,
            (f"{big:,}", f"{small:,}"),
        )
    )

    print(f"\n[4] filters at {big:,} messages")
    first = Planted(big).rare_ids[0]
    with b._connection() as conn:
        hit = conn.execute(
            "SELECT session_id, agent_uuid, kind FROM messages WHERE id = %s", (first,)
        ).fetchone()
    assert hit is not None
    filters: dict[str, dict[str, Any]] = {
        "session": {"session_id": hit["session_id"]},
        "agent": {"agent_uuid": hit["agent_uuid"]},
        "kind": {"kinds": [hit["kind"]]},
        "time": {
            "since": EPOCH + timedelta(seconds=30 * (first - 2000)),
            "until": EPOCH + timedelta(seconds=30 * (first + 50_000)),
        },
    }
    for name, kw in filters.items():
        got = b.search(RARE, **kw)
        if not got:
            raise RuntimeError(f"setup error: no {RARE!r} with filter {kw}")
        o, f = compare(
            Side(name, searcher(b, RARE, **kw)),
            Side("none", lambda: b.search(RARE)),
            runs,
            f"rare word by {name}",
        )
        rows.append(
            ratio_row(
                f"rare word filtered by {name} vs unfiltered, {big:,} msgs", o, f, 2, (name, "none")
            )
        )
    for name, kw in filters.items():
        t = p50(searcher(b, COMMON, **kw), runs)
        rows.append(
            Row(f"common word filtered by {name}, {big:,} msgs, p50", ms(t), "(report)", None)
        )
    t = p50(searcher(b, COMMON, order="recent"), runs)
    rows.append(Row(f"common word, order='recent', {big:,} msgs, p50", ms(t), "(report)", None))
    t = p50(lambda: b.search("parser"), runs)
    rows.append(Row(f"middling word 'parser' (~3%), {big:,} msgs, p50", ms(t), "(report)", None))

    print(f"\n[5] relevance: planted exact phrases at {big:,} messages")
    planted = Planted(big).phrase_ids()
    ok = True
    places = []
    for query, _text, _where in PHRASES:
        hits = b.search(query, limit=10)
        ids = [h.message.id for h in hits]
        place = ids.index(planted[query]) + 1 if planted[query] in ids else None
        places.append(f"{query!r}: {place}")
        ok = ok and place is not None and place <= 3
        t = p50(searcher(b, query), max(1, runs // 2))
        print(f"  {query!r}: planted message #{planted[query]} at place {place}; p50 {ms(t)}")
    rows.append(
        Row(
            f"exact phrase in the top 3, {big:,} msgs ({len(PHRASES)} phrases)",
            "; ".join(places),
            "always",
            ok,
            check=True,
        )
    )
    query = COMMON_PHRASE[0]
    ids = [h.message.id for h in b.search(query, limit=50)]
    place = ids.index(planted[query]) + 1 if planted[query] in ids else None
    t = p50(lambda: b.search(query), max(1, runs // 2))
    rows.append(
        Row(
            f"phrase of the most common words only ({query!r}), {big:,} msgs",
            f"place {place or '> 50'}, p50 {ms(t)}",
            "(report)",
            None,
        )
    )
    return rows


if __name__ == "__main__":
    run(main)
