-- name: search_messages(query, session_id, limit)
-- Full-text search ranked by ts_rank_cd, newest first on ties, with a highlighted snippet.
-- Only the first 100,000 characters of a content are searchable (migration 0006: a tsvector
-- holds at most 1 MB). The WHERE uses the exact idx_messages_search expression so the GIN index
-- drives the scan;
-- ordering by rank (not id) keeps the planner from walking the primary key backwards.
-- Snippets are computed only for the rows that survive the LIMIT.
WITH q AS (
    SELECT websearch_to_tsquery('english', :query) AS tsq
), hits AS (
    SELECT m.id, ts_rank_cd(to_tsvector('english', left(m.content, 100000)), q.tsq) AS rank
    FROM messages AS m, q
    WHERE to_tsvector('english', left(m.content, 100000)) @@ q.tsq
      AND (CAST(:session_id AS bigint) IS NULL OR m.session_id = :session_id)
    ORDER BY rank DESC, m.id DESC
    LIMIT :limit
)
SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, m.data, m.created_at, hits.rank,
       ts_headline('english', left(m.content, 100000), q.tsq,
                   'StartSel=[, StopSel=], MaxWords=30, MinWords=10, MaxFragments=2') AS snippet
FROM hits
JOIN messages AS m ON m.id = hits.id
CROSS JOIN q
ORDER BY hits.rank DESC, m.id DESC;

-- name: search_terms(query)^
-- The tsquery that search_messages runs for :query, as text ('parser' & !'lexer'): empty when
-- the query has no searchable word (empty, only stop words such as "the", only punctuation).
SELECT websearch_to_tsquery('english', :query)::text AS terms;
