"""Full-text search over events.

Owns the search operation shared by both faces (see ``ops``). Invariants: any text is accepted
as a query (web-search syntax: quotes, ``or``, ``-term``) and an empty or stop-word-only query
finds nothing instead of failing; ``limit`` is capped at ``MAX_SEARCH_LIMIT``; hits come best
first (``ts_rank_cd``), newest first on ties; ``search_terms`` shows the tsquery ``search`` runs
for a query, empty exactly when that search cannot match anything.
"""

from __future__ import annotations

from .errors import InvalidArgument
from .models import SearchHit
from .ops import Op, many, one
from .validate import check_id, check_limit, check_text

__all__ = ["MAX_SEARCH_LIMIT", "search", "search_terms"]

#: Largest ``limit`` ``search`` honours; larger values are capped to it.
MAX_SEARCH_LIMIT = 1000


def search(query: str, session_id: int | None, limit: int) -> Op[list[SearchHit]]:
    if not isinstance(query, str):
        raise InvalidArgument("search query must be a string")
    check_text(query, "query")
    if session_id is not None:
        check_id(session_id, "session_id")
    check_limit(limit)
    if not query.strip():
        return []
    rows = yield many(
        "search_messages", query=query, session_id=session_id, limit=min(limit, MAX_SEARCH_LIMIT)
    )
    return [SearchHit.from_row(r) for r in rows]


def search_terms(query: str) -> Op[str]:
    if not isinstance(query, str):
        raise InvalidArgument("search query must be a string")
    check_text(query, "query")
    if not query.strip():
        return ""
    row = yield one("search_terms", query=query)
    return str(row["terms"])
