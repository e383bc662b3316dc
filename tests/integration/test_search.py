"""Full-text search: ranking, the bounded candidate strategy, filters, pages, hostile input.

The strategy tests compare ``search`` with an oracle built from the database's own matching and
ranking functions on every row (``search_vector @@ ...`` and ``ts_rank_cd`` over the whole
corpus, then the documented rules applied in Python), under strategy settings that force each
path: walk only, probes only, a walk handing over to probes, many small probes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import ikigai_store as ik
from ikigai_store import search as search_module

pytestmark = pytest.mark.db


@pytest.fixture
def corpus(ikigai_store: ik.Store) -> tuple[int, int, list[ik.Message]]:
    s1, s2 = ikigai_store.create_session(), ikigai_store.create_session()
    msgs = [
        ikigai_store.append(s1, "user", "How do I parse JSON in C?"),
        ikigai_store.append(s1, "assistant", "Use yyjson to parse JSON; parsing JSON is fast."),
        ikigai_store.append(s1, "user", "What about foo-bar widgets?"),
        ikigai_store.append(s2, "user", "The quick brown fox jumps"),
        ikigai_store.append(s2, "assistant", "JSON again, in another session"),
        ikigai_store.append(s2, "clear"),
    ]
    return s1, s2, msgs


def test_ranked_best_first(
    ikigai_store: ik.Store, corpus: tuple[int, int, list[ik.Message]]
) -> None:
    """Hits are ordered by rank; the message mentioning json most often ranks first."""
    hits = ikigai_store.search("json")
    assert hits[0].message.id == corpus[2][1].id
    assert {h.message.id for h in hits} == {corpus[2][i].id for i in (0, 1, 4)}
    ranks = [h.rank for h in hits]
    assert ranks == sorted(ranks, reverse=True)
    assert all(isinstance(h.rank, float) and 0 < h.rank < 1 for h in hits)
    assert "[JSON]" in hits[0].snippet


def test_ties_break_newest_first(ikigai_store: ik.Store) -> None:
    """Equal ranks come newest (highest id) first."""
    sid = ikigai_store.create_session()
    ids = [ikigai_store.append(sid, "user", "zebra").id for _ in range(3)]
    assert [h.message.id for h in ikigai_store.search("zebra")] == ids[::-1]


def test_session_scope_and_limit(
    ikigai_store: ik.Store, corpus: tuple[int, int, list[ik.Message]]
) -> None:
    """session_id restricts hits to one session; limit caps the count."""
    s2 = corpus[1]
    assert {h.message.session_id for h in ikigai_store.search("json", session_id=s2)} == {s2}
    assert len(ikigai_store.search("json", limit=1)) == 1
    assert len(ikigai_store.search("json", limit=10**9)) == 3  # capped, not rejected


def test_stemming_and_websearch_syntax(
    ikigai_store: ik.Store, corpus: tuple[int, int, list[ik.Message]]
) -> None:
    """English stemming applies; quotes, or and -term follow web-search syntax."""
    msgs = corpus[2]
    assert msgs[1].id in {h.message.id for h in ikigai_store.search("parsing")}
    assert {h.message.id for h in ikigai_store.search('"brown fox"')} == {msgs[3].id}
    assert {h.message.id for h in ikigai_store.search("json -yyjson")} == {msgs[0].id, msgs[4].id}
    assert {h.message.id for h in ikigai_store.search("fox or widgets")} == {msgs[2].id, msgs[3].id}


HOSTILE = [
    "",
    "   ",
    "'",
    '"',
    '"unbalanced',
    "foo-bar",
    "a & b | !c",
    "fox:*",
    "((",
    "())",
    "\\",
    "\\\\x",
    "'; DROP TABLE messages; --",
    "%s %(x)s",
    "<script>",
    "the",
    "!!!",
    ":*",
    "&|!<->",
    "x" * 5000,
    "ünïcödé ñ",
    "🚀",
    'site:example.com intitle:json -"quick fox" OR parse*',
    "a" * 3000 + " json",
    " ".join(f"w{i}" for i in range(1600))[: search_module.MAX_QUERY_CHARS],
    "the and of to a in",
    "- -- --- json",
]


@pytest.mark.parametrize("query", HOSTILE)
@pytest.mark.parametrize("order", ["rank", "recent"])
def test_any_text_is_safe(
    ikigai_store: ik.Store, corpus: tuple[int, int, list[ik.Message]], query: str, order: str
) -> None:
    """Arbitrary user text (up to MAX_QUERY_CHARS) never raises and never damages data."""
    hits = ikigai_store.search(query, order=order)
    assert isinstance(hits, list)
    assert all(isinstance(h, ik.SearchHit) for h in hits)
    assert len(ikigai_store.messages(corpus[0])) == 3


def test_empty_query_finds_nothing(ikigai_store: ik.Store, corpus: object) -> None:
    """Empty and stop-word-only queries return no hits."""
    assert ikigai_store.search("") == []
    assert ikigai_store.search("the") == []


@pytest.mark.parametrize("query", ["", "   ", "the", "the and of", "!!! ???", "-the"])
def test_search_terms_empty_when_nothing_is_searchable(ikigai_store: ik.Store, query: str) -> None:
    """search_terms is '' for empty, stop-word-only and punctuation-only queries."""
    assert ikigai_store.search_terms(query) == ""
    assert ikigai_store.search(query) == []


def test_search_terms_shows_the_tsquery(ikigai_store: ik.Store) -> None:
    """search_terms is the stemmed tsquery search runs: stop words dropped, -term negated."""
    assert ikigai_store.search_terms("the parsers -lexer") == "'parser' & !'lexer'"
    assert ikigai_store.search_terms('"quick fox" or dog') == "'quick' <-> 'fox' | 'dog'"


@pytest.mark.parametrize("query", [None, 3, "a\x00b", "x" * (search_module.MAX_QUERY_CHARS + 1)])
def test_search_terms_bad_query(ikigai_store: ik.Store, query: object) -> None:
    """A query that is not text, holds a NUL or is too long raises InvalidArgument."""
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.search_terms(query)  # type: ignore[arg-type]


def test_hyphenated_term(ikigai_store: ik.Store, corpus: tuple[int, int, list[ik.Message]]) -> None:
    """A hyphenated query finds the hyphenated word."""
    assert {h.message.id for h in ikigai_store.search("foo-bar")} == {corpus[2][2].id}


NAIVE = datetime(2025, 1, 1)


@pytest.mark.parametrize(
    ("kwargs", "query", "match"),
    [
        ({"limit": 0}, "x", "limit"),
        ({"limit": -1}, "x", "limit"),
        ({"limit": True}, "x", "limit"),
        ({"session_id": 0}, "x", "session_id"),
        ({}, "a\x00", "NUL"),
        ({}, "x" * (search_module.MAX_QUERY_CHARS + 1), "MAX_QUERY_CHARS"),
        ({}, b"json", "string"),
        ({"order": "best"}, "x", "order"),
        ({"order": None}, "x", "order"),
        ({"kinds": "user"}, "x", "kinds"),
        ({"kinds": []}, "x", "kinds"),
        ({"kinds": ["user", "User"]}, "x", "unknown kind"),
        ({"kinds": [1]}, "x", "unknown kind"),
        ({"since": NAIVE}, "x", "since"),
        ({"until": "2025-01-01"}, "x", "until"),
        ({"agent_uuid": ""}, "x", "agent uuid"),
        ({"agent_uuid": "a" * 65}, "x", "agent uuid"),
        ({"before": 42}, "x", "SearchHit"),
    ],
)
def test_bad_arguments(
    ikigai_store: ik.Store, kwargs: dict[str, Any], query: Any, match: str
) -> None:
    """Bad limits, ids, orders, kinds, times, pages and queries raise InvalidArgument."""
    with pytest.raises(ik.InvalidArgument, match=match):
        ikigai_store.search(query, **kwargs)


def test_before_must_be_a_real_hit(ikigai_store: ik.Store) -> None:
    """A hand-made hit with no horizon, or a non-finite rank, is refused."""
    sid = ikigai_store.create_session()
    msg = ikigai_store.append(sid, "user", "zebra")
    for bad in (ik.SearchHit(msg, 0.5, ""), ik.SearchHit(msg, float("nan"), "", horizon=msg.id)):
        with pytest.raises(ik.InvalidArgument, match="before"):
            ikigai_store.search("zebra", before=bad)


def test_hits_carry_the_horizon(ikigai_store: ik.Store) -> None:
    """Every hit names the newest message id its search saw."""
    sid = ikigai_store.create_session()
    first = ikigai_store.append(sid, "user", "zebra")
    last = ikigai_store.append(sid, "user", "unrelated words")
    assert [(h.message.id, h.horizon) for h in ikigai_store.search("zebra")] == [
        (first.id, last.id)
    ]


# ------------------------------------------------------------------------------ the oracle

#: Words with the frequencies that make a common, a middling and a rare term.
COMMON, MIDDLE, RARE, ABSENT = "review", "parser", "quokka", "zeppelin"
FILLER = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "theta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
]


@dataclass
class Corpus:
    sessions: list[int]
    agents: list[str]
    messages: list[ik.Message]


def build_corpus(store: Any, n: int = 240, seed: int = 11) -> Corpus:
    """``n`` messages over 3 sessions (2 agents each), all kinds that hold text, created one
    second apart in id order; ``review`` in most, ``parser`` in some, ``quokka`` in a few, and
    the phrase "slow parser review" planted twice (once in an old message)."""
    rng = random.Random(seed)
    sessions = [store.create_session(f"s{i}") for i in range(3)]
    agents = [store.create_agent(s).uuid for s in sessions for _ in range(2)]
    kinds = ["user", "assistant", "tool_result", "system"]
    msgs: list[ik.Message] = []
    for i in range(n):
        words = rng.choices(FILLER, k=rng.randint(3, 12))
        if rng.random() < 0.7:
            words.insert(rng.randrange(len(words) + 1), COMMON)
        if rng.random() < 0.15:
            words.insert(rng.randrange(len(words) + 1), MIDDLE)
        if rng.random() < 0.02:
            words.append(RARE)
        if i in (5, n - 30):
            words += ["slow", "parser", "review"]
        if rng.random() < 0.1:
            words += [MIDDLE, "slow"]  # the words of the phrase, not as the phrase
        a = rng.randrange(len(agents))
        msgs.append(
            store.append(
                sessions[a // 2], kinds[i % len(kinds)], " ".join(words), agent_uuid=agents[a]
            )
        )
    with store._connection() as conn:
        conn.execute(
            # 2025-01-01 00:00 UTC plus id - first seconds (to_timestamp is immutable: Citus
            # refuses a stable function of a column in an UPDATE of a distributed table).
            "UPDATE messages SET created_at = to_timestamp(1735689600 + (id - %s)) WHERE id >= %s",
            (msgs[0].id, msgs[0].id),
        )
    stored = sorted((m for sid in sessions for m in store.messages(sid)), key=lambda m: m.id)
    assert [m.id for m in stored] == [m.id for m in msgs]
    return Corpus(sessions, agents, stored)


def oracle(
    store: Any,
    query: str,
    *,
    order: str = "rank",
    limit: int = 50,
    horizon: int | None = None,
    after: tuple[float, int] | None = None,
    **filters: Any,
) -> list[int]:
    """The ids ``search`` must return: every row tested with the database's @@, newest first;
    the newest CANDIDATES matches (plus, for plain words, the newest CANDIDATES exact-phrase
    matches among the newest PHRASE_SCOPE, ranked 1 higher) ranked by ts_rank_cd(..., 33), ties
    newest first."""
    with store._connection() as conn:
        rows = conn.execute(
            """
            SELECT id, session_id, agent_uuid, kind, created_at,
                   search_vector @@ websearch_to_tsquery('english', %(q)s) AS hit,
                   COALESCE(search_vector @@ phraseto_tsquery('english', %(q)s), false)
                     AND numnode(phraseto_tsquery('english', %(q)s)) >= 3 AS phrase,
                   CAST(ts_rank_cd(search_vector, websearch_to_tsquery('english', %(q)s), 33)
                        AS float8) AS rank
            FROM messages ORDER BY id DESC
            """,
            {"q": query},
        ).fetchall()

    def passes(r: Any) -> bool:
        return (
            r["hit"]
            and (horizon is None or r["id"] <= horizon)
            and (filters.get("session_id") is None or r["session_id"] == filters["session_id"])
            and (filters.get("agent_uuid") is None or r["agent_uuid"] == filters["agent_uuid"])
            and (filters.get("kinds") is None or r["kind"] in filters["kinds"])
            and (filters.get("since") is None or r["created_at"] >= filters["since"])
            and (filters.get("until") is None or r["created_at"] < filters["until"])
        )

    matches = [r for r in rows if passes(r)]
    if order == "recent":
        return [r["id"] for r in matches[:limit]]
    plain = search_module.plain_words(query)
    scope = matches[: search_module.PHRASE_SCOPE] if plain else []
    phrase = {r["id"] for r in scope if r["phrase"]}
    phrase = set(sorted(phrase, reverse=True)[: search_module.CANDIDATES])
    chosen = matches[: search_module.CANDIDATES] + [r for r in scope if r["id"] in phrase]
    score = {r["id"]: r["rank"] + (1.0 if r["id"] in phrase else 0.0) for r in chosen}
    ordered = sorted(score, key=lambda i: (score[i], i), reverse=True)
    if after is not None:
        ordered = [i for i in ordered if (score[i], i) < after]
    return ordered[:limit]


@pytest.fixture
def strategy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The collection strategy forced down one path (module constants patched)."""
    name = request.param
    settings: dict[str, Any] = {
        "default": {},
        "walk only": {"_WALK_DENSITY": 0.0},
        "probes only": {"_WALK_DENSITY": 2.0},
        "short walks": {"_WALK_DENSITY": 0.0, "_MAX_WALK": 3},
        "small probes": {"_WALK_DENSITY": 2.0, "_PROBE_SLACK": 0.02},
        "few candidates": {"CANDIDATES": 7, "PHRASE_SCOPE": 40, "_MAX_WALK": 20},
    }[name]
    for attr, value in settings.items():
        monkeypatch.setattr(search_module, attr, value)
    yield name


QUERIES = [
    COMMON,
    MIDDLE,
    RARE,
    ABSENT,
    "slow parser review",
    f"{COMMON} {MIDDLE}",
    f"{RARE} or {MIDDLE}",
    f"{COMMON} -{MIDDLE}",
    '"parser review"',
    "-review",
]


@pytest.mark.parametrize(
    "strategy",
    ["default", "walk only", "probes only", "short walks", "small probes", "few candidates"],
    indirect=True,
)
def test_strategy_agrees_with_the_oracle(ikigai_store: ik.Store, strategy: str) -> None:
    """Whichever steps collect the candidates, search returns exactly the oracle's hits, in its
    order, for every query, filter and order."""
    c = build_corpus(ikigai_store)
    t0 = c.messages[0].created_at
    filter_sets: list[dict[str, Any]] = [
        {},
        {"session_id": c.sessions[1]},
        {"agent_uuid": c.agents[3]},
        {"agent_uuid": c.agents[3], "session_id": c.sessions[1]},
        {"kinds": ["system"]},
        {"kinds": ["user", "tool_result"]},
        {"since": t0 + timedelta(seconds=100)},
        {"until": t0 + timedelta(seconds=60)},
        {"since": t0 + timedelta(seconds=50), "until": t0 + timedelta(seconds=90)},
        {"session_id": c.sessions[0], "kinds": ["user"], "since": t0 + timedelta(seconds=20)},
    ]
    for filters in filter_sets:
        assert oracle(ikigai_store, COMMON, **filters), filters  # no filter leaves nothing
        for query in QUERIES:
            for order in ("rank", "recent"):
                for limit in (3, 50):
                    got = ikigai_store.search(query, order=order, limit=limit, **filters)
                    want = oracle(ikigai_store, query, order=order, limit=limit, **filters)
                    assert [h.message.id for h in got] == want, (query, order, limit, filters)
                    if order == "rank":
                        assert [h.rank for h in got] == sorted((h.rank for h in got), reverse=True)


def test_rank_looks_at_the_newest_candidates_only(
    ikigai_store: ik.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank order is the best of the newest CANDIDATES matches: a better but older match is not
    among them (the documented bound), while recent order still reaches it."""
    monkeypatch.setattr(search_module, "CANDIDATES", 3)
    sid = ikigai_store.create_session()
    best = ikigai_store.append(sid, "user", "zebra zebra zebra zebra")
    newer = [
        ikigai_store.append(sid, "user", f"a long text about one zebra {i}").id for i in range(3)
    ]
    assert sorted(h.message.id for h in ikigai_store.search("zebra")) == newer
    monkeypatch.setattr(search_module, "CANDIDATES", 4)
    assert ikigai_store.search("zebra")[0].message.id == best.id
    assert ikigai_store.search("zebra", order="recent", limit=4)[-1].message.id == best.id


def test_exact_phrase_ranks_first_even_when_old(
    ikigai_store: ik.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message holding the query's words as an exact phrase ranks above every other match,
    even when it is older than the newest CANDIDATES matches; a quoted query asks for the
    phrase only, and -term or `or` turn the phrase boost off."""
    monkeypatch.setattr(search_module, "CANDIDATES", 5)
    sid = ikigai_store.create_session()
    phrase = ikigai_store.append(sid, "assistant", "the stale connection pool timed out again")
    others = [
        ikigai_store.append(sid, "user", f"pool {i}: connection stale? stale pool connection")
        for i in range(12)
    ]
    hits = ikigai_store.search("stale connection pool")
    assert hits[0].message.id == phrase.id
    assert hits[0].rank >= 1 > hits[1].rank
    assert len(hits) == 6  # the newest 5 matches and the older phrase match
    assert [h.message.id for h in ikigai_store.search('"stale connection pool"')] == [phrase.id]
    boosted = {h.message.id for h in ikigai_store.search("stale connection -zebra") if h.rank >= 1}
    assert boosted == set()
    recent = ikigai_store.search("stale connection pool", order="recent", limit=3)
    assert [h.message.id for h in recent] == [m.id for m in others[::-1][:3]]


def test_phrase_scope_is_bounded(ikigai_store: ik.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exact-phrase matches older than the newest PHRASE_SCOPE matches are not looked for."""
    monkeypatch.setattr(search_module, "CANDIDATES", 2)
    monkeypatch.setattr(search_module, "PHRASE_SCOPE", 4)
    sid = ikigai_store.create_session()
    old = ikigai_store.append(sid, "user", "flaky parser test")
    for i in range(4):
        ikigai_store.append(sid, "user", f"test {i} of the flaky lexer and its parser")
    assert old.id not in {h.message.id for h in ikigai_store.search("flaky parser test")}
    monkeypatch.setattr(search_module, "PHRASE_SCOPE", 5)
    assert ikigai_store.search("flaky parser test")[0].message.id == old.id


# ------------------------------------------------------------------------------ filters


def test_filters_combine(ikigai_store: ik.Store) -> None:
    """session_id, agent_uuid, kinds and the [since, until) time range all apply together."""
    c = build_corpus(ikigai_store, n=60)
    t0 = c.messages[0].created_at
    filters = {
        "session_id": c.sessions[2],
        "agent_uuid": c.agents[4],
        "kinds": ["user", "assistant"],
        "since": t0 + timedelta(seconds=10),
        "until": t0 + timedelta(seconds=50),
    }
    hits = ikigai_store.search(COMMON, limit=100, **filters)
    assert hits
    for h in hits:
        m = h.message
        assert (m.session_id, m.agent_uuid) == (c.sessions[2], c.agents[4])
        assert m.kind in ("user", "assistant")
        assert filters["since"] <= m.created_at < filters["until"]  # type: ignore[operator]
    since = t0 + timedelta(seconds=7)
    assert ikigai_store.search(COMMON, since=since, until=since) == []  # an empty range
    assert ikigai_store.search(COMMON, since=since + timedelta(1), until=since) == []


def test_time_bounds_accept_any_time_zone(ikigai_store: ik.Store) -> None:
    """since/until are instants: the same bound in another zone gives the same hits."""
    c = build_corpus(ikigai_store, n=40)
    bound = c.messages[20].created_at
    zoned = bound.astimezone(timezone(timedelta(hours=-7)))
    a = ikigai_store.search(COMMON, since=bound, limit=100)
    b = ikigai_store.search(COMMON, since=zoned, limit=100)
    assert [h.message.id for h in a] == [h.message.id for h in b]
    assert min(h.message.id for h in a) >= c.messages[20].id


def test_unknown_session_or_agent_finds_nothing(ikigai_store: ik.Store) -> None:
    """Filters naming nothing that exists give no hits (not an error)."""
    build_corpus(ikigai_store, n=20)
    assert ikigai_store.search(COMMON, session_id=10**12) == []
    assert ikigai_store.search(COMMON, agent_uuid="no-such-agent") == []


# ------------------------------------------------------------------------------ pages


def test_recent_pages_walk_every_match_once(ikigai_store: ik.Store) -> None:
    """before= the last hit pages through all matches newest first, each exactly once."""
    build_corpus(ikigai_store, n=120)
    want = oracle(ikigai_store, MIDDLE, order="recent", limit=1000)
    got: list[int] = []
    page = ikigai_store.search(MIDDLE, order="recent", limit=4)
    while page:
        got += [h.message.id for h in page]
        page = ikigai_store.search(MIDDLE, order="recent", limit=4, before=page[-1])
    assert got == want


@pytest.mark.parametrize(
    "strategy", ["default", "walk only", "probes only", "few candidates"], indirect=True
)
def test_rank_pages_do_not_shift_when_messages_arrive(
    ikigai_store: ik.Store, strategy: str
) -> None:
    """Rank-order pages continue after (rank, id) within the first page's horizon: together
    they are the one long page, and messages appended meanwhile appear on none of them."""
    c = build_corpus(ikigai_store, n=150)
    for query in (COMMON, "slow parser review", MIDDLE):
        want = oracle(ikigai_store, query, limit=1000)
        got: list[int] = []
        page = ikigai_store.search(query, limit=5)
        horizon = page[0].horizon
        while page:
            assert {h.horizon for h in page} == {horizon}
            got += [h.message.id for h in page]
            ikigai_store.append(c.sessions[0], "user", f"{query} {query} arrives later")
            page = ikigai_store.search(query, limit=5, before=page[-1])
        assert got == want, query
        assert max(got) <= horizon


# ------------------------------------------------------------------------------ plans


def _plan(store: Any, name: str, **params: Any) -> str:
    sql = getattr(ik.queries, name).sql
    with store._connection() as conn:
        rows = conn.execute("EXPLAIN " + sql, params).fetchall()
    return "\n".join(r["QUERY PLAN"] for r in rows)


NO_FILTERS = {"session_id": None, "agent_uuid": None, "kinds": None, "since": None, "until": None}


def test_plans_use_the_intended_indexes(ikigai_store: ik.Store) -> None:
    """A walk reads the primary key (or the filter's index) backwards under a LIMIT; a probe of
    everything is a bitmap scan of idx_messages_search_vector alone, a probe of an id range
    reads no more than the range; the estimate is an EXPLAIN (runs nothing)."""
    sid = ikigai_store.create_session()
    with ikigai_store._connection() as conn:
        conn.execute(
            "INSERT INTO messages (session_id, kind, content) "
            "SELECT %s, 'user', 'common words number ' || g FROM generate_series(1, 20000) g",
            (sid,),
        )
        # What autovacuum does to a table that has settled: GIN's pending list merged.
        conn.execute("SELECT gin_clean_pending_list('idx_messages_search_vector')")
        conn.execute("ANALYZE messages")
    small = ikigai_store.create_session()
    ikigai_store.append(small, "user", "a few words")
    step = {"query": "xylophone", "phrase": False, "need": 50, "keep": 50}
    walk = _plan(ikigai_store, "search_walk", **step, **NO_FILTERS, hi=10**9, window=500)
    assert "Index Scan Backward using messages_pkey" in walk, walk
    in_session = {**NO_FILTERS, "session_id": small}
    session_walk = _plan(
        ikigai_store, "search_walk_session", **step, **in_session, hi=10**9, window=500
    )
    assert "Index Scan Backward using idx_messages_session" in session_walk, session_walk
    cursor = {"by_time": False, "at": None, "at_id": None}
    probe = _plan(ikigai_store, "search_probe", **step, **NO_FILTERS, **cursor, hi=10**9)
    assert "Bitmap Index Scan on idx_messages_search_vector" in probe, probe
    assert "messages_pkey" not in probe, probe
    part = _plan(ikigai_store, "search_probe_range", **step, **NO_FILTERS, lo=5000, hi=9000)
    assert "Seq Scan" not in part, part
    with ikigai_store._connection() as conn:
        row = conn.execute(ik.queries.search_estimate.sql, {"query": "xylophone", **NO_FILTERS})
        estimate = search_module.Estimate.from_row(row.fetchone())
    assert estimate.total >= 19000 and estimate.matches < 1000


def test_stored_vector_follows_content(ikigai_store: ik.Store) -> None:
    """The trigger keeps search_vector equal to the content's vector: on insert, on an update of
    content, and against a direct write of the vector."""
    sid = ikigai_store.create_session()
    msg = ikigai_store.append(sid, "user", "original words")
    with ikigai_store._connection() as conn:
        conn.execute("UPDATE messages SET content = 'changed text' WHERE id = %s", (msg.id,))
        conn.execute("UPDATE messages SET search_vector = 'forged' WHERE id = %s", (msg.id,))
        row = conn.execute(
            "SELECT search_vector = to_tsvector('english', content) AS same, "
            "search_vector::text AS v FROM messages WHERE id = %s",
            (msg.id,),
        ).fetchone()
    assert row["same"], row["v"]
    assert [h.message.id for h in ikigai_store.search("changed")] == [msg.id]
    assert ikigai_store.search("original") == []


# ------------------------------------------------------------------------------ mail


@pytest.fixture
def people(ikigai_store: ik.Store) -> ik.Store:
    for name in ("alice", "bob", "carol"):
        ikigai_store.identities.register(name)
    return ikigai_store


def test_mail_search_shares_the_strategy(people: ik.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mail search: subject above body, identity scope, exact phrase first (even beyond the
    candidates), recent order, pages with before=, the horizon."""
    monkeypatch.setattr(search_module, "CANDIDATES", 3)
    phrase = people.mail.send("alice", ["bob"], "status", "the nightly build broke again")
    body = [
        people.mail.send("alice", ["carol"], f"note {i}", "build nightly: broke? nightly build")
        for i in range(4)
    ]
    subject = people.mail.send("bob", ["carol"], "Nightly build", "see logs")
    hits = people.mail.search("nightly build broke")
    assert hits[0].mail.id == phrase.id and hits[0].rank >= 1
    assert {h.mail.id for h in hits} == {phrase.id, body[-1].id, body[-2].id, body[-3].id}
    ranked = people.mail.search("nightly")
    assert ranked[0].mail.id == subject.id  # newest three candidates; subject weighs more
    assert {h.mail.id for h in people.mail.search("nightly", identity="bob")} == {
        phrase.id,
        subject.id,
    }
    recent = people.mail.search("nightly", order="recent", limit=2)
    assert [h.mail.id for h in recent] == [subject.id, body[-1].id]
    more = people.mail.search("nightly", order="recent", limit=2, before=recent[-1])
    assert [h.mail.id for h in more] == [body[-2].id, body[-3].id]
    assert {h.horizon for h in recent + more} == {subject.id}
    page2 = people.mail.search("nightly", limit=1, before=ranked[0])
    assert [h.mail.id for h in page2] == [ranked[1].mail.id]


def test_mail_search_refuses_bad_input(people: ik.Store) -> None:
    """Unknown identity NotFound; wrong hit type, bad order, long query InvalidArgument."""
    people.mail.send("alice", ["bob"], "hello", "world")
    with pytest.raises(ik.NotFound):
        people.mail.search("hello", identity="nobody")
    sid = people.create_session()
    msg = people.append(sid, "user", "hello")
    hit = people.search("hello")[0]
    assert hit.message.id == msg.id
    with pytest.raises(ik.InvalidArgument, match="MailHit"):
        people.mail.search("hello", before=hit)  # type: ignore[arg-type]
    with pytest.raises(ik.InvalidArgument, match="order"):
        people.mail.search("hello", order="newest")
    with pytest.raises(ik.InvalidArgument, match="MAX_QUERY_CHARS"):
        people.mail.search("x" * (search_module.MAX_QUERY_CHARS + 1))


def test_module_constants_are_documented() -> None:
    """The documented bounds: 1000 candidates, 10,000 phrase scope, MAX_SEARCH_LIMIT 1000."""
    assert (search_module.CANDIDATES, search_module.PHRASE_SCOPE) == (1000, 10_000)
    assert ik.MAX_SEARCH_LIMIT == search_module.MAX_SEARCH_LIMIT == 1000
    assert search_module.MAX_QUERY_CHARS == 10_000


def test_naive_datetime_message_names_the_fix(ikigai_store: ik.Store) -> None:
    """A naive since/until is refused with a message that says what is expected."""
    with pytest.raises(ik.InvalidArgument, match="timezone-aware"):
        ikigai_store.search("x", until=datetime(2025, 1, 1))
    assert ikigai_store.search("x", until=datetime(2025, 1, 1, tzinfo=UTC)) == []
