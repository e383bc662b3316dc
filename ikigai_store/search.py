"""Full-text search over events, and the strategy mail search shares: bounded work at any size.

Owns the search operation of both faces (see ``ops``) and the collection strategy that
``mail.search`` reuses. Messages and mail keep a stored ``search_vector`` under a GIN index
(migrations 0015 and 0007). What always holds:

- ``order="rank"`` (the default) returns the best matches among the newest ``CANDIDATES``
  (1000) matches: ``ts_rank_cd`` normalised by document length, scaled into [0, 1), best first,
  newest first on ties. A query of two or more plain words (no quotes, ``or`` or ``-term``) also
  looks for its words as an exact phrase among the newest ``PHRASE_SCOPE`` (10,000) matches,
  older than the newest 1000 or not: the newest ``CANDIDATES`` of those rank above every other
  match (their ``rank`` is 1 + the normal rank);
- ``order="recent"`` returns matches newest first (by id) and reads no further than the page;
- so no search ranks more than 2000 rows, or reads more than a bounded number, however many
  match. The newest matches are collected newest first in steps (``queries/search.sql``): a
  *walk* reads rows through a btree (the primary key, or the filter's index) and tests each
  stored vector (a common word: a few rows per match; at most ``_MAX_WALK`` rows), a *probe*
  asks the GIN index for the matches in an id range sized, from the planner's estimate or from
  what earlier steps saw, to hold the matches still needed (a rarer word), or for every match
  when the planner expects few. The steps cover consecutive ranges, so which steps ran never
  changes a result;
- filters (``session_id``, ``agent_uuid``, ``kinds``, and ``since`` inclusive / ``until``
  exclusive on ``created_at``) restrict every step, so "the newest matches" are the newest that
  pass them. With ``since``/``until`` (and no session or agent), "newest" is by ``created_at``
  (then id), walked through ``idx_messages_created``: created_at follows id order except between
  transactions that commit out of order;
- on Citus (the citus extension is installed) a search without ``session_id`` collects its
  newest matches in one distributed statement (``search_fanout``: every shard returns its
  newest ``need`` matches, ``ORDER BY ... LIMIT`` pushed into each shard's task, and the
  coordinator merges them) instead of walks and probes that each ask every shard; the result
  is the same (the newest matches are the newest matches). A shard's work is its own planner's
  choice, bounded by ``need`` rows when it walks its primary key (a common word);
- pages: ``before=`` the last hit of a page gives the next page of the same search. A hit carries
  its search's ``horizon`` (the newest id it saw): a rank-order page looks at nothing above the
  horizon and continues after (rank, id), so the candidates and the order are those of the first
  page even while new rows arrive; a recent-order page continues below the hit's id;
- any text is a query (web-search syntax: ``"phrase"``, ``or``, ``-term``); one without a
  searchable word finds nothing; a query that is not text, holds NUL or is longer than
  ``MAX_QUERY_CHARS`` is ``InvalidArgument``, as are bad filters, orders and pages; ``limit`` is
  capped at ``MAX_SEARCH_LIMIT``; ``search_terms`` shows the tsquery ``search`` runs, empty
  exactly when it can match nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import InvalidArgument
from .models import VALID_KINDS, MailHit, SearchHit
from .ops import Area, FaceT, Op, many, one, operation
from .validate import MAX_ID, check_id, check_limit, check_text, check_uuid, check_when

__all__ = [
    "CANDIDATES",
    "MAX_QUERY_CHARS",
    "MAX_SEARCH_LIMIT",
    "ORDERS",
    "PHRASE_SCOPE",
    "UNKNOWN",
    "Before",
    "Estimate",
    "Queries",
    "check_before",
    "check_kinds",
    "check_order",
    "check_query",
    "plain_words",
    "ranked",
    "search",
    "search_terms",
]

#: Largest ``limit`` ``search`` honours; larger values are capped to it.
MAX_SEARCH_LIMIT = 1000
#: Rank order ranks the best of the newest this many matches.
CANDIDATES = 1000
#: Exact-phrase matches are looked for among the newest this many matches of a plain query.
PHRASE_SCOPE = 10_000
#: Longest query, in characters.
MAX_QUERY_CHARS = 10_000
#: The orders ``search`` knows.
ORDERS = ("rank", "recent")

# A walk tests every row it reads: worth it when at least this fraction of them match (below,
# GIN probes read fewer rows).
_WALK_DENSITY = 0.1
# Most rows one walk reads; a walk that did not find enough hands over to probes.
_MAX_WALK = 20_000
# Probe ranges are sized to hold this many times the matches still needed.
_PROBE_SLACK = 1.5
# Rows holding the words that a probe of everything reads rather than AND the filter's index
# (which costs a read of every index entry of the filter).
_GIN_ONLY = 5000
# Lowest bigint: a probe from here reaches every row below its upper bound.
_MIN_ID = -(2**63)


def check_query(query: object) -> str:
    """A search query: text without NUL, at most ``MAX_QUERY_CHARS`` characters."""
    if not isinstance(query, str):
        raise InvalidArgument(f"search query must be a string, got {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidArgument(
            f"search query is {len(query)} characters; at most {MAX_QUERY_CHARS} (MAX_QUERY_CHARS)"
        )
    check_text(query, "query")
    return query


def check_order(order: object) -> bool:
    """``"rank"`` (True) or ``"recent"`` (False)."""
    if not isinstance(order, str) or order not in ORDERS:
        raise InvalidArgument(f"order must be 'rank' or 'recent', got {order!r}")
    return order == "rank"


def plain_words(query: str) -> bool:
    """True when ``query`` is two or more words without web-search syntax (no quotes, no ``or``,
    no ``-term``): its exact-phrase matches rank first."""
    if '"' in query:
        return False
    words = query.split()
    return len(words) >= 2 and not any(w.lower() == "or" or w.startswith("-") for w in words)


def check_kinds(kinds: object) -> list[str] | None:
    """None, or a non-empty collection of event kinds (returned sorted, without repeats)."""
    if kinds is None:
        return None
    if isinstance(kinds, (str, bytes)) or not isinstance(kinds, Iterable):
        raise InvalidArgument(
            f"kinds must be a list of event kinds such as ['user'], got {kinds!r}"
        )
    out = list(kinds)
    if not out:
        raise InvalidArgument("kinds must name at least one kind (None: every kind)")
    for kind in out:
        if not isinstance(kind, str) or kind not in VALID_KINDS:
            raise InvalidArgument(
                f"unknown kind {kind!r} in kinds; kinds are {', '.join(sorted(VALID_KINDS))}"
            )
    return sorted(set(out))


@dataclass(frozen=True)
class Queries:
    """The queries of one search (``queries/search.sql``): ``start`` (terms, phrase form, newest
    id), ``estimate`` (EXPLAIN of the counts), the ``walk`` whose index fits the filters,
    ``probe`` (the GIN index alone, then the filters: everything below an id), ``probe_index``
    (the GIN index and the filter's index, or an id range, in a bitmap AND) and ``hits`` (rank,
    fetch the page). Walk, probes and estimate take ``filters``. ``indexed``: the walk reads only
    rows that pass the filters (through a filter's index), not every row newest first.
    ``narrowing``: probe_index narrows a scan of everything to the rows of a filter's index
    (else it takes id ranges only). ``by_time``: walk and probe_index go by created_at.
    ``fanout``: on Citus (``start`` says so), the one statement that collects instead of the
    walks and probes (a search across sessions); empty: none."""

    start: str
    estimate: str
    walk: str
    probe: str
    probe_index: str
    hits: str
    filters: Mapping[str, Any]
    indexed: bool = False
    narrowing: bool = False
    by_time: bool = False
    fanout: str = ""


@dataclass(frozen=True)
class Before:
    """Where a page starts: after (rank, id) in rank order, below id in recent order; horizon
    is the first page's newest id."""

    rank: float
    id: int
    horizon: int


def check_before(before: object, hit_type: type[SearchHit] | type[MailHit]) -> Before | None:
    """None, or where the page after ``before`` (a hit of the same kind of search) starts."""
    if before is None:
        return None
    if not isinstance(before, hit_type):
        raise InvalidArgument(
            f"before must be a {hit_type.__name__} (the last hit of the previous page), "
            f"got {type(before).__name__}"
        )
    item = before.message.id if isinstance(before, SearchHit) else before.mail.id
    rank, horizon = before.rank, before.horizon
    if (
        not isinstance(rank, float)
        or not math.isfinite(rank)
        or isinstance(horizon, bool)
        or not isinstance(horizon, int)
        or not 0 < item <= horizon <= MAX_ID
    ):
        raise InvalidArgument(
            f"before is not a hit a search returned (rank {rank!r}, id {item!r}, "
            f"horizon {horizon!r})"
        )
    return Before(rank, item, horizon)


@dataclass(frozen=True)
class Estimate:
    """The planner's estimates (each at least 1): rows that match and pass the filters, rows
    that pass the filters, rows that match, all rows."""

    matches: float
    source: float
    term: float
    total: float

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Estimate:
        """From ``search_estimate``'s EXPLAIN (FORMAT JSON): an Append of the four counts. A
        plan of another shape gives ``UNKNOWN``."""
        try:
            plan = next(iter(row.values()))[0]["Plan"]
            counts = [
                float(p["Plan Rows"])
                for p in plan.get("Plans", ())
                if p.get("Parent Relationship") == "Member"
            ]
        except (LookupError, TypeError, ValueError, AttributeError, StopIteration):
            return UNKNOWN
        if len(counts) != 4:
            return UNKNOWN
        return cls(*(max(1.0, c) for c in counts))


#: What to assume without an estimate: every row matches (so a walk, bounded by ``_MAX_WALK``,
#: comes first, and later steps are sized from what it saw).
UNKNOWN = Estimate(1.0, 1.0, 1.0, 1.0)


@dataclass
class _Collected:
    ids: list[int] = field(default_factory=list)
    phrase_ids: list[int] = field(default_factory=list)
    found: int = 0

    def absorb(self, row: Mapping[str, Any], keep: int) -> None:
        self.ids.extend(int(i) for i in row["ids"][: max(0, keep - len(self.ids))])
        self.phrase_ids.extend(
            int(i) for i in row["phrase_ids"][: max(0, keep - len(self.phrase_ids))]
        )
        self.found += int(row["found"])


def _collect(
    q: Queries, *, query: str, phrase: bool, guess: Estimate, hi: int, need: int, keep: int
) -> Op[_Collected]:
    """The newest ``need`` matches with id < ``hi`` (all, if fewer): the first ``keep`` ids, and
    the exact-phrase matches among all of them (when ``phrase``).

    A walk comes first when the planner expects at least ``_WALK_DENSITY`` of the rows it reads
    to match. Then probes, each over an id range expected to hold the matches still needed (from
    the estimate, then from what was seen), the last one reaching down to the lowest id; by
    created_at (``by_time``), one probe takes the rest of the time range. When the planner
    expects at most ``_GIN_ONLY`` rows to hold the words, the first probe reads them all (the
    GIN index alone: ``probe``); a probe of everything left otherwise goes through the filter's
    index too (``probe_index``), or, without a filter, reads them all as well.
    """
    got = _Collected()
    base = {"query": query, "phrase": phrase, **q.filters}
    few = guess.term <= _GIN_ONLY
    per_read = min(1.0, guess.matches / (guess.source if q.indexed else guess.total))
    walked: Mapping[str, Any] | None = None
    if per_read >= _WALK_DENSITY:
        window = min(_MAX_WALK, math.ceil(need / per_read * 1.25))
        walked = yield one(q.walk, **base, hi=hi, window=window, need=need, keep=keep)
        got.absorb(walked, keep)
        if got.found >= need or walked["exhausted"] or walked["floor"] is None:
            return got
    if q.by_time:
        row = yield one(
            q.probe if few or not q.narrowing else q.probe_index,
            **base,
            hi=hi,
            by_time=True,
            at=None if walked is None else walked["floor_at"],
            at_id=None if walked is None else walked["floor"],
            need=need - got.found,
            keep=keep - len(got.ids),
        )
        got.absorb(row, keep)
        return got
    upper = hi if walked is None else int(walked["floor"])  # [upper, hi) has been examined
    seen = hi - upper
    per_id = got.found / seen if seen and got.found else None
    if walked is None:
        per_id = min(1.0, guess.matches / guess.total)
    while True:
        remaining = need - got.found
        if per_id:
            span = math.ceil(remaining / per_id * _PROBE_SLACK)
        elif seen > 0:
            span = 4 * seen  # nothing found yet: look four times as far
        else:
            span = 0
        # A range of over half of what is left costs more as a bitmap of ids than it saves, and
        # so does any range when few rows hold the words: then read them all (GIN alone).
        whole = span <= 0 or span >= (upper - 1) // 2 or (walked is None and few and not seen)
        lo = _MIN_ID if whole else upper - span
        row = yield one(
            q.probe if lo == _MIN_ID and (few or not q.narrowing) else q.probe_index,
            **base,
            lo=lo,
            hi=upper,
            by_time=False,
            at=None,
            at_id=None,
            need=remaining,
            keep=keep - len(got.ids),
        )
        got.absorb(row, keep)
        if lo == _MIN_ID or got.found >= need:
            return got
        seen += upper - lo
        upper = lo
        per_id = got.found / seen if got.found else None


def _fanout(
    q: Queries, *, query: str, phrase: bool, guess: Estimate, hi: int, need: int, keep: int
) -> Op[_Collected]:
    """``_collect``'s result in one statement (``q.fanout``): on Citus, every shard returns its
    newest ``need`` matches and the coordinator merges them (``guess`` is not needed)."""
    filters = {k: v for k, v in q.filters.items() if k != "session_id"}
    rows = yield many(q.fanout, query=query, phrase=phrase, **filters, hi=hi, need=need)
    got = _Collected(found=len(rows))
    got.ids = [int(r["id"]) for r in rows[:keep]]
    got.phrase_ids = [int(r["id"]) for r in rows if r["phrase"]][:keep]
    return got


def ranked(
    q: Queries, *, query: str, by_rank: bool, limit: int, before: Before | None
) -> Op[tuple[list[Mapping[str, Any]], int]]:
    """Run a search: the rows of the page (as ``q.hits`` returns them) and the horizon."""
    if not query.strip():
        return [], 0
    start = yield one(q.start, query=query, phrase=by_rank and plain_words(query))
    if not start["terms"] or start["newest"] is None:
        return [], 0
    newest = int(start["newest"])
    if q.fanout and start.get("citus"):
        collect = _fanout
        guess = UNKNOWN
    else:
        collect = _collect
        guess = Estimate.from_row((yield one(q.estimate, query=query, **q.filters)))
    if by_rank:
        horizon = before.horizon if before is not None else newest
        phrase = bool(start["phrase"])
        got = yield from collect(
            q,
            query=query,
            phrase=phrase,
            guess=guess,
            hi=min(horizon, MAX_ID - 1) + 1,
            need=PHRASE_SCOPE if phrase else CANDIDATES,
            keep=CANDIDATES,
        )
    else:
        horizon = newest
        hi = before.id if before is not None else min(horizon, MAX_ID - 1) + 1
        got = yield from collect(
            q, query=query, phrase=False, guess=guess, hi=hi, need=limit, keep=limit
        )
    if not got.ids and not got.phrase_ids:
        return [], horizon
    rows = yield many(
        q.hits,
        query=query,
        ids=sorted(set(got.ids) | set(got.phrase_ids)),
        phrase_ids=got.phrase_ids,
        by_rank=by_rank,
        before_rank=before.rank if by_rank and before is not None else None,
        before_id=before.id if by_rank and before is not None else None,
        limit=limit,
    )
    return list(rows), horizon


def search(
    query: str,
    *,
    session_id: int | None = None,
    limit: int = 50,
    agent_uuid: str | None = None,
    kinds: Iterable[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    order: str = "rank",
    before: SearchHit | None = None,
) -> Op[list[SearchHit]]:
    """Full-text search (web-search syntax: ``"phrase"``, ``or``, ``-term``).

    ``order="rank"``: the best matches among the newest 1000 (``CANDIDATES``), best first,
    with messages holding a plain multi-word query as an exact phrase first (looked for
    among the newest 10,000 matches); ``order="recent"``: matches newest first. The work
    done is bounded by these numbers, not by how many messages match. Filters:
    ``session_id``, ``agent_uuid`` (the agent's own events), ``kinds`` (e.g.
    ``["user", "assistant"]``), ``since`` (inclusive) and ``until`` (exclusive) on
    ``created_at`` (aware datetimes). ``before=`` the last hit of a page gives the next page.
    An empty or stop-word-only query finds nothing; ``limit`` is capped at
    ``MAX_SEARCH_LIMIT``. See ``ikigai_store.search`` for the exact semantics.
    """
    check_query(query)
    assert isinstance(query, str)
    if session_id is not None:
        check_id(session_id, "session_id")
    check_limit(limit)
    assert isinstance(limit, int)
    if agent_uuid is not None:
        check_uuid(agent_uuid)
    kind_list = check_kinds(kinds)
    since_at, until_at = check_when(since, "since"), check_when(until, "until")
    by_rank = check_order(order)
    page = check_before(before, SearchHit)
    if since_at is not None and until_at is not None and since_at >= until_at:
        return []
    filters = {
        "session_id": session_id,
        "agent_uuid": agent_uuid,
        "kinds": kind_list,
        "since": since_at,
        "until": until_at,
    }
    # Walks and probes go through the index of the most selective filter.
    if agent_uuid is not None:
        source = "_agent"
    elif session_id is not None:
        source = "_session"
    elif since_at is not None or until_at is not None:
        source = "_time"
    elif kind_list is not None:
        source = "_kinds"
    else:
        source = ""
    q = Queries(
        start="search_start",
        estimate="search_estimate",
        walk="search_walk" + ("" if source == "_kinds" else source),
        probe="search_probe",
        probe_index="search_probe" + (source or "_range"),
        hits="search_hits",
        filters=filters,
        indexed=source in ("_agent", "_session", "_time"),
        narrowing=source != "",
        by_time=source == "_time",
        # A search across sessions asks every shard of a Citus cluster: once, not per step.
        fanout=""
        if session_id is not None
        else "search_fanout_time"
        if source == "_time"
        else "search_fanout",
    )
    rows, horizon = yield from ranked(
        q, query=query, by_rank=by_rank, limit=min(limit, MAX_SEARCH_LIMIT), before=page
    )
    return [SearchHit.from_row(r, horizon) for r in rows]


def search_terms(query: str) -> Op[str]:
    """The tsquery ``search(query)`` runs, as text (``'parser' & !'lexer'``).

    Empty when the query has no searchable word (empty, only stop words such as "the",
    only punctuation): such a query can match nothing, and ``search`` returns ``[]``.
    """
    check_query(query)
    assert isinstance(query, str)
    if not query.strip():
        return ""
    row = yield one("search_terms", query=query)
    return str(row["terms"])


class SearchOps(Area[FaceT]):
    """The search operations of a store (``Store``, ``AsyncStore``)."""

    search = operation(search)
    search_terms = operation(search_terms)
