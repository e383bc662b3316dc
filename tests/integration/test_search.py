"""Full-text search: ranking, scoping, limits, hostile input, index use."""

from __future__ import annotations

import pytest

import ikigai_store as ik

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
    assert all(isinstance(h.rank, float) and h.rank > 0 for h in hits)
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
]


@pytest.mark.parametrize("query", HOSTILE)
def test_any_text_is_safe(
    ikigai_store: ik.Store, corpus: tuple[int, int, list[ik.Message]], query: str
) -> None:
    """Arbitrary user text never raises and never damages data."""
    hits = ikigai_store.search(query)
    assert isinstance(hits, list)
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


@pytest.mark.parametrize("query", [None, 3, "a\x00b"])
def test_search_terms_bad_query(ikigai_store: ik.Store, query: object) -> None:
    """A query that is not text, or holds a NUL, raises InvalidArgument."""
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.search_terms(query)  # type: ignore[arg-type]


def test_hyphenated_term(ikigai_store: ik.Store, corpus: tuple[int, int, list[ik.Message]]) -> None:
    """A hyphenated query finds the hyphenated word."""
    assert {h.message.id for h in ikigai_store.search("foo-bar")} == {corpus[2][2].id}


@pytest.mark.parametrize(
    ("kwargs", "query"),
    [({"limit": 0}, "x"), ({"limit": -1}, "x"), ({"session_id": 0}, "x"), ({}, "a\x00")],
)
def test_bad_arguments(ikigai_store: ik.Store, kwargs: dict[str, int], query: str) -> None:
    """Bad limits, session ids and NUL characters raise InvalidArgument."""
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.search(query, **kwargs)


def test_rare_term_plan_uses_gin_index(ikigai_store: ik.Store) -> None:
    """The search query is driven by idx_messages_search, not a backward primary-key scan."""
    sid = ikigai_store.create_session()
    with ikigai_store._connection() as conn:
        conn.execute(
            "INSERT INTO messages (session_id, kind, content) "
            "SELECT %s, 'user', 'common words number ' || g FROM generate_series(1, 20000) g",
            (sid,),
        )
        conn.execute("ANALYZE messages")
        sql = ik.queries.search_messages.sql.rstrip().rstrip(";")
        plan = "\n".join(
            r["QUERY PLAN"]
            for r in conn.execute(
                "EXPLAIN " + sql, {"query": "xylophone", "session_id": None, "limit": 50}
            )
        )
    assert "idx_messages_search" in plan, plan
    assert "Index Scan Backward using messages_pkey" not in plan, plan
