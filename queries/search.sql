-- Full-text search over events (messages) and mail, with work bounded by the result size.
--
-- Every searchable row carries a stored tsvector (messages.search_vector, migration 0015;
-- mail.search_vector, migration 0007) under a GIN index. A search runs in steps that
-- ikigai_store/search.py drives (its docstring states the semantics):
--   1. search_start: the tsquery, whether an exact-phrase boost applies and the newest id (the
--      search's horizon); search_estimate: how many rows match, pass the filters, both, as the
--      planner estimates them from statistics (an EXPLAIN);
--   2. collection of the newest matches, newest first, in bounded steps: a *walk* reads rows
--      newest first through a btree (primary key, or the filter's index) and tests each stored
--      vector, stopping after :need matches or :window rows (cheap when the words are common);
--      a *probe* lets the GIN index find the matches below an id or in an id range (cheap when
--      they are rare);
--   3. search_hits ranks the collected candidates and computes snippets for the page only.
-- Walks and probes return one aggregated row: found (matches taken, at most :need), ids (the
-- newest :keep of them), phrase_ids (those that also match the exact phrase), floor (every row
-- of the source with a lower id, or an older (created_at, id) for the time walk, is
-- unexamined) and, for walks, exhausted (nothing below floor is left).
-- Plans: statements are prepared after a few executions (psycopg), and PostgreSQL may then run
-- a generic plan that does not know the parameters. So each statement's shape fixes its plan:
-- * in walks the tsquery is an InitPlan ((SELECT tsq FROM q)), not a join: the walk's index
--   order reaches LIMIT without a sort, so a walk stops as soon as it has :need matches;
-- * in probes the tsquery is an InitPlan too (the planner cannot estimate it and treats it as
--   rare: the GIN index), and the scan (CTE found, a fence) has no ORDER BY or LIMIT: a probe
--   must not become a walk of the primary key, which would read every row of the range when
--   the word is rare;
-- * the filter that drives a walk or a probe is a plain condition (session_id = :session_id,
--   never the optional form), so a generic plan still uses its index; optional filters are
--   (CAST(:x AS ...) IS NULL OR ...), checked on the rows read.
-- Filters: :session_id, :agent_uuid, :kinds (text[]), :since (inclusive) and :until
-- (exclusive) on created_at; NULL means no filter.

-- name: search_start(query, phrase)^
-- What a search of :query needs first: terms (the tsquery as text, '' when it can match
-- nothing), phrase (with :phrase: whether the exact-phrase form of :query has two words or
-- more), newest (the highest message id: the search's horizon) and citus (the citus extension
-- is installed: a search across sessions then collects in one statement, search_fanout).
SELECT CAST(websearch_to_tsquery('english', :query) AS text) AS terms,
       CAST(:phrase AS boolean) AND numnode(phraseto_tsquery('english', :query)) >= 3 AS phrase,
       (SELECT max(id) FROM messages) AS newest,
       EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') AS citus;

-- name: search_estimate(query, session_id, agent_uuid, kinds, since, until)^
-- The planner's estimates (EXPLAIN: nothing runs) of how many messages match :query and pass
-- the filters, pass the filters, match :query, and how many there are: from the statistics
-- ANALYZE keeps (for search_vector: its most common words).
EXPLAIN (FORMAT JSON)
SELECT 1
FROM messages AS m
WHERE m.search_vector @@ websearch_to_tsquery('english', :query)
  AND (CAST(:session_id AS bigint) IS NULL OR m.session_id = :session_id)
  AND (CAST(:agent_uuid AS text) IS NULL OR m.agent_uuid = :agent_uuid)
  AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
  AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
  AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
UNION ALL
SELECT 1
FROM messages AS m
WHERE (CAST(:session_id AS bigint) IS NULL OR m.session_id = :session_id)
  AND (CAST(:agent_uuid AS text) IS NULL OR m.agent_uuid = :agent_uuid)
  AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
  AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
  AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
UNION ALL
SELECT 1 FROM messages WHERE search_vector @@ websearch_to_tsquery('english', :query)
UNION ALL
SELECT 1 FROM messages;

-- name: search_walk(query, phrase, kinds, since, until, hi, window, need, keep)^
-- Walk all messages with id < :hi newest first (primary key, backwards), at most :window rows.
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), src AS NOT MATERIALIZED (
    SELECT m.id, m.search_vector
    FROM messages AS m
    WHERE m.id < :hi
      AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
      AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
      AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
    ORDER BY m.id DESC
    LIMIT :window
), hits AS MATERIALIZED (
    SELECT src.id, COALESCE(src.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM src
    WHERE src.search_vector @@ (SELECT tsq FROM q)
    ORDER BY src.id DESC
    LIMIT :need
), seen AS (
    SELECT count(*) AS n, min(src.id) AS low
    FROM src
    WHERE (SELECT count(*) FROM hits) < :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            ELSE (SELECT low FROM seen) END AS floor,
       (SELECT count(*) FROM hits) < :need AND (SELECT n FROM seen) < :window AS exhausted;

-- name: search_walk_session(query, phrase, session_id, kinds, since, until, hi, window, need, keep)^
-- Walk one session's messages with id < :hi newest first (idx_messages_session, backwards).
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), src AS NOT MATERIALIZED (
    SELECT m.id, m.search_vector
    FROM messages AS m
    WHERE m.session_id = :session_id AND m.id < :hi
      AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
      AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
      AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
    ORDER BY m.id DESC
    LIMIT :window
), hits AS MATERIALIZED (
    SELECT src.id, COALESCE(src.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM src
    WHERE src.search_vector @@ (SELECT tsq FROM q)
    ORDER BY src.id DESC
    LIMIT :need
), seen AS (
    SELECT count(*) AS n, min(src.id) AS low
    FROM src
    WHERE (SELECT count(*) FROM hits) < :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            ELSE (SELECT low FROM seen) END AS floor,
       (SELECT count(*) FROM hits) < :need AND (SELECT n FROM seen) < :window AS exhausted;

-- name: search_walk_agent(query, phrase, session_id, agent_uuid, kinds, since, until, hi, window, need, keep)^
-- Walk one agent's own messages with id < :hi newest first (idx_messages_agent, backwards).
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), src AS NOT MATERIALIZED (
    SELECT m.id, m.search_vector
    FROM messages AS m
    WHERE m.agent_uuid = :agent_uuid AND m.id < :hi
      AND (CAST(:session_id AS bigint) IS NULL OR m.session_id = :session_id)
      AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
      AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
      AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
    ORDER BY m.id DESC
    LIMIT :window
), hits AS MATERIALIZED (
    SELECT src.id, COALESCE(src.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM src
    WHERE src.search_vector @@ (SELECT tsq FROM q)
    ORDER BY src.id DESC
    LIMIT :need
), seen AS (
    SELECT count(*) AS n, min(src.id) AS low
    FROM src
    WHERE (SELECT count(*) FROM hits) < :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            ELSE (SELECT low FROM seen) END AS floor,
       (SELECT count(*) FROM hits) < :need AND (SELECT n FROM seen) < :window AS exhausted;

-- name: search_probe(query, phrase, session_id, agent_uuid, kinds, since, until, hi, by_time, at, at_id, need, keep)^
-- The newest :need matches with id < :hi (by_time: latest created_at first, below (:at,
-- :at_id) when given), found through the GIN index alone: every row that holds the words is
-- read, then the filters are checked. For words the planner expects in few rows (search.py
-- decides). The scan has no other condition (CTE found is a fence): in a generic plan of the
-- prepared statement the planner would take any id or filter condition for selective and AND a
-- bitmap of a whole index into the scan. floor: NULL (nothing is left) unless :need were found.
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), found AS MATERIALIZED (
    SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.created_at,
           COALESCE(m.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM messages AS m
    WHERE m.search_vector @@ (SELECT tsq FROM q)
), hits AS MATERIALIZED (
    SELECT found.id, found.created_at, found.phrase
    FROM found
    WHERE found.id < :hi
      AND (CAST(:session_id AS bigint) IS NULL OR found.session_id = :session_id)
      AND (CAST(:agent_uuid AS text) IS NULL OR found.agent_uuid = :agent_uuid)
      AND (CAST(:kinds AS text[]) IS NULL OR found.kind = ANY(CAST(:kinds AS text[])))
      AND (CAST(:since AS timestamptz) IS NULL OR found.created_at >= :since)
      AND (CAST(:until AS timestamptz) IS NULL OR found.created_at < :until)
      AND (CAST(:at AS timestamptz) IS NULL
           OR (found.created_at, found.id) < (CAST(:at AS timestamptz), CAST(:at_id AS bigint)))
    ORDER BY CASE WHEN CAST(:by_time AS boolean) THEN found.created_at END DESC, found.id DESC
    LIMIT :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits
             ORDER BY CASE WHEN CAST(:by_time AS boolean) THEN created_at END DESC, id DESC
             LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase
             ORDER BY CASE WHEN CAST(:by_time AS boolean) THEN created_at END DESC, id DESC)
       AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            END AS floor;

-- name: search_probe_range(query, phrase, session_id, agent_uuid, kinds, since, until, lo, hi, need, keep)^
-- search_probe over the id range [:lo, :hi) only: a bitmap AND of the GIN index and the range
-- (a range from :lo is selective for the planner even in a generic plan of a prepared
-- statement, which is what a probe of part of the history wants).
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), found AS MATERIALIZED (
    SELECT m.id, COALESCE(m.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM messages AS m
    WHERE m.search_vector @@ (SELECT tsq FROM q)
      AND m.id >= :lo AND m.id < :hi
      AND (CAST(:session_id AS bigint) IS NULL OR m.session_id = :session_id)
      AND (CAST(:agent_uuid AS text) IS NULL OR m.agent_uuid = :agent_uuid)
      AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
      AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
      AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
), hits AS MATERIALIZED (
    SELECT found.*
    FROM found
    ORDER BY found.id DESC
    LIMIT :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            ELSE CAST(:lo AS bigint) END AS floor;

-- name: search_probe_session(query, phrase, session_id, agent_uuid, kinds, since, until, lo, hi, need, keep)^
-- search_probe for one session: its index (idx_messages_session) joins the bitmap AND.
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), found AS MATERIALIZED (
    SELECT m.id, COALESCE(m.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM messages AS m
    WHERE m.search_vector @@ (SELECT tsq FROM q)
      AND m.id >= :lo AND m.id < :hi
      AND m.session_id = :session_id
      AND (CAST(:agent_uuid AS text) IS NULL OR m.agent_uuid = :agent_uuid)
      AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
      AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
      AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
), hits AS MATERIALIZED (
    SELECT found.*
    FROM found
    ORDER BY found.id DESC
    LIMIT :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            ELSE CAST(:lo AS bigint) END AS floor;

-- name: search_probe_agent(query, phrase, session_id, agent_uuid, kinds, since, until, lo, hi, need, keep)^
-- search_probe for one agent's events: idx_messages_agent joins the bitmap AND.
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), found AS MATERIALIZED (
    SELECT m.id, COALESCE(m.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM messages AS m
    WHERE m.search_vector @@ (SELECT tsq FROM q)
      AND m.id >= :lo AND m.id < :hi
      AND (CAST(:session_id AS bigint) IS NULL OR m.session_id = :session_id)
      AND m.agent_uuid = :agent_uuid
      AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
      AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
      AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
), hits AS MATERIALIZED (
    SELECT found.*
    FROM found
    ORDER BY found.id DESC
    LIMIT :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            ELSE CAST(:lo AS bigint) END AS floor;

-- name: search_probe_kinds(query, phrase, session_id, agent_uuid, kinds, since, until, lo, hi, need, keep)^
-- search_probe for some kinds: idx_messages_kind (kind, id) joins the bitmap AND.
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), found AS MATERIALIZED (
    SELECT m.id, COALESCE(m.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM messages AS m
    WHERE m.search_vector @@ (SELECT tsq FROM q)
      AND m.id >= :lo AND m.id < :hi
      AND (CAST(:session_id AS bigint) IS NULL OR m.session_id = :session_id)
      AND (CAST(:agent_uuid AS text) IS NULL OR m.agent_uuid = :agent_uuid)
      AND m.kind = ANY(CAST(:kinds AS text[]))
      AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
      AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
), hits AS MATERIALIZED (
    SELECT found.*
    FROM found
    ORDER BY found.id DESC
    LIMIT :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            ELSE CAST(:lo AS bigint) END AS floor;

-- name: search_walk_time(query, phrase, session_id, agent_uuid, kinds, since, until, hi, window, need, keep)^
-- Walk the messages created in [:since, :until) with id < :hi, latest created_at first
-- (idx_messages_created, backwards), at most :window rows. Its floor is (floor_at, floor_id):
-- rows before it in (created_at, id) order are unexamined.
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), src AS NOT MATERIALIZED (
    SELECT m.id, m.created_at, m.search_vector
    FROM messages AS m
    WHERE m.created_at >= COALESCE(CAST(:since AS timestamptz), '-infinity')
      AND m.created_at < COALESCE(CAST(:until AS timestamptz), 'infinity')
      AND m.id < :hi
      AND (CAST(:session_id AS bigint) IS NULL OR m.session_id = :session_id)
      AND (CAST(:agent_uuid AS text) IS NULL OR m.agent_uuid = :agent_uuid)
      AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
    ORDER BY m.created_at DESC, m.id DESC
    LIMIT :window
), hits AS MATERIALIZED (
    SELECT src.id, src.created_at,
           COALESCE(src.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM src
    WHERE src.search_vector @@ (SELECT tsq FROM q)
    ORDER BY src.created_at DESC, src.id DESC
    LIMIT :need
), last AS (
    SELECT hits.created_at, hits.id
    FROM hits
    WHERE (SELECT count(*) FROM hits) >= :need
    ORDER BY hits.created_at, hits.id
    LIMIT 1
), seen AS (
    SELECT count(*) AS n
    FROM src
    WHERE (SELECT count(*) FROM hits) < :need
), low AS (
    SELECT src.created_at, src.id
    FROM src
    WHERE (SELECT count(*) FROM hits) < :need
    ORDER BY src.created_at, src.id
    LIMIT 1
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY created_at DESC, id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY created_at DESC, id DESC) AS phrase_ids,
       COALESCE((SELECT created_at FROM last), (SELECT created_at FROM low)) AS floor_at,
       COALESCE((SELECT id FROM last), (SELECT id FROM low)) AS floor,
       (SELECT count(*) FROM hits) < :need AND (SELECT n FROM seen) < :window AS exhausted;

-- name: search_probe_time(query, phrase, session_id, agent_uuid, kinds, since, until, hi, at, at_id, need, keep)^
-- The :need matches created in [:since, :until) with id < :hi that come first in latest
-- created_at order, below (:at, :at_id) when given: GIN and idx_messages_created (a bitmap AND;
-- :hi is applied after the scan, as in search_probe).
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), found AS MATERIALIZED (
    SELECT m.id, m.created_at, COALESCE(m.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM messages AS m
    WHERE m.search_vector @@ (SELECT tsq FROM q)
      AND m.created_at >= COALESCE(CAST(:since AS timestamptz), '-infinity')
      AND m.created_at < COALESCE(CAST(:until AS timestamptz), 'infinity')
      AND (m.created_at, m.id) < (COALESCE(CAST(:at AS timestamptz), 'infinity'),
                                  COALESCE(CAST(:at_id AS bigint), 0))
      AND (CAST(:session_id AS bigint) IS NULL OR m.session_id = :session_id)
      AND (CAST(:agent_uuid AS text) IS NULL OR m.agent_uuid = :agent_uuid)
      AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
), hits AS MATERIALIZED (
    SELECT found.*
    FROM found
    WHERE found.id < :hi
    ORDER BY found.created_at DESC, found.id DESC
    LIMIT :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY created_at DESC, id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY created_at DESC, id DESC) AS phrase_ids;

-- name: search_fanout(query, phrase, agent_uuid, kinds, since, until, hi, need)
-- Citus, a search across sessions: the newest :need matches with id < :hi that pass the
-- filters (id, phrase: also an exact-phrase match), newest first, in one distributed
-- statement: every shard runs it with ORDER BY id DESC LIMIT :need (the tsquery and the
-- filters inlined, so each shard's planner picks its primary key walked backwards for a common
-- word, its GIN index for a rare one) and the coordinator merges the shards' rows, keeping the
-- newest :need. Not used on plain PostgreSQL (search.py aggregates the rows as a walk does).
SELECT m.id,
       CASE WHEN CAST(:phrase AS boolean)
            THEN m.search_vector @@ phraseto_tsquery('english', :query)
            ELSE false END AS phrase
FROM messages AS m
WHERE m.search_vector @@ websearch_to_tsquery('english', :query)
  AND m.id < :hi
  AND (CAST(:agent_uuid AS text) IS NULL OR m.agent_uuid = :agent_uuid)
  AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
  AND (CAST(:since AS timestamptz) IS NULL OR m.created_at >= :since)
  AND (CAST(:until AS timestamptz) IS NULL OR m.created_at < :until)
ORDER BY m.id DESC
LIMIT :need;

-- name: search_fanout_time(query, phrase, agent_uuid, kinds, since, until, hi, need)
-- search_fanout in latest created_at (then id) order, for a search with :since or :until:
-- every shard runs ORDER BY created_at DESC, id DESC LIMIT :need.
SELECT m.id,
       CASE WHEN CAST(:phrase AS boolean)
            THEN m.search_vector @@ phraseto_tsquery('english', :query)
            ELSE false END AS phrase
FROM messages AS m
WHERE m.search_vector @@ websearch_to_tsquery('english', :query)
  AND m.id < :hi
  AND m.created_at >= COALESCE(CAST(:since AS timestamptz), '-infinity')
  AND m.created_at < COALESCE(CAST(:until AS timestamptz), 'infinity')
  AND (CAST(:agent_uuid AS text) IS NULL OR m.agent_uuid = :agent_uuid)
  AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
ORDER BY m.created_at DESC, m.id DESC
LIMIT :need;

-- name: search_hits(query, ids, phrase_ids, by_rank, before_rank, before_id, limit)
-- The page: the candidates :ids ranked (ts_rank_cd with length normalisation, scaled into
-- [0, 1), plus 1 for a member of :phrase_ids, so exact-phrase matches come first), best first
-- and newest first on ties (:by_rank), else newest first; with :before_rank, only those after
-- (before_rank, before_id) in that order. Snippets are computed for the page's rows only, from
-- 1000 characters around the first place a query word's stem occurs (ts_headline parses all it
-- is given: a whole 100,000-character log would cost milliseconds); from the whole searchable
-- prefix when no stem occurs as written (a stem such as 'happi' is not in 'happy').
WITH q AS MATERIALIZED (
    SELECT t.tsq,
           ARRAY(SELECT replace(w[1], '''''', '''')
                 FROM regexp_matches(querytree(t.tsq), '''((?:[^'']|'''')*)''', 'g') AS w)
           AS words
    FROM (SELECT websearch_to_tsquery('english', :query) AS tsq) AS t
), ranked AS (
    SELECT m.id,
           CAST(ts_rank_cd(m.search_vector, (SELECT tsq FROM q), 1 | 32) AS float8)
           + CASE WHEN m.id = ANY(CAST(:phrase_ids AS bigint[])) THEN 1 ELSE 0 END AS rank
    FROM messages AS m
    WHERE m.id = ANY(CAST(:ids AS bigint[]))
), page AS (
    SELECT ranked.id, ranked.rank
    FROM ranked
    WHERE CAST(:before_rank AS float8) IS NULL
       OR (ranked.rank, ranked.id) < (CAST(:before_rank AS float8), CAST(:before_id AS bigint))
    ORDER BY CASE WHEN CAST(:by_rank AS boolean) THEN ranked.rank ELSE 0 END DESC, ranked.id DESC
    LIMIT :limit
)
SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, m.data, m.created_at, page.rank,
       ts_headline('english', excerpt.text, q.tsq,
                   'StartSel=[, StopSel=], MaxWords=30, MinWords=10, MaxFragments=2') AS snippet
FROM page
JOIN messages AS m ON m.id = page.id
CROSS JOIN q
CROSS JOIN LATERAL (
    SELECT CASE WHEN first.at IS NULL THEN left(m.content, 100000)
                ELSE substr(m.content, greatest(1, first.at - 200), 1000) END AS text
    FROM (SELECT min(NULLIF(strpos(lower(left(m.content, 100000)), w.word), 0)) AS at
          FROM unnest(q.words) AS w (word)) AS first
) AS excerpt
ORDER BY CASE WHEN CAST(:by_rank AS boolean) THEN page.rank ELSE 0 END DESC, m.id DESC;

-- name: search_mail_start(query, phrase)^
-- search_start for mail: terms, phrase and the newest mail id.
SELECT CAST(websearch_to_tsquery('english', :query) AS text) AS terms,
       CAST(:phrase AS boolean) AND numnode(phraseto_tsquery('english', :query)) >= 3 AS phrase,
       (SELECT max(id) FROM mail) AS newest;

-- name: search_mail_estimate(query, identity)^
-- search_estimate for mail: matches in the mail :identity sent or was sent, that mail, all
-- matches, all mail.
EXPLAIN (FORMAT JSON)
SELECT 1
FROM mail AS m
WHERE m.search_vector @@ websearch_to_tsquery('english', :query)
  AND (CAST(:identity AS text) IS NULL
       OR m.sender_id = (SELECT id FROM identities WHERE name = :identity)
       OR :identity = ANY(m.recipients))
UNION ALL
SELECT 1
FROM mail AS m
WHERE CAST(:identity AS text) IS NULL
   OR m.sender_id = (SELECT id FROM identities WHERE name = :identity)
   OR :identity = ANY(m.recipients)
UNION ALL
SELECT 1 FROM mail WHERE search_vector @@ websearch_to_tsquery('english', :query)
UNION ALL
SELECT 1 FROM mail;

-- name: search_mail_walk(query, phrase, identity, hi, window, need, keep)^
-- Walk mail with id < :hi newest first (primary key, backwards); with :identity, only mail it
-- sent or was sent (its name among the recipients, purged copies included).
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), me AS MATERIALIZED (
    SELECT id FROM identities WHERE name = :identity
), src AS NOT MATERIALIZED (
    SELECT m.id, m.search_vector
    FROM mail AS m
    WHERE m.id < :hi
      AND (CAST(:identity AS text) IS NULL
           OR m.sender_id = (SELECT id FROM me)
           OR :identity = ANY(m.recipients))
    ORDER BY m.id DESC
    LIMIT :window
), hits AS MATERIALIZED (
    SELECT src.id, COALESCE(src.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM src
    WHERE src.search_vector @@ (SELECT tsq FROM q)
    ORDER BY src.id DESC
    LIMIT :need
), seen AS (
    SELECT count(*) AS n, min(src.id) AS low
    FROM src
    WHERE (SELECT count(*) FROM hits) < :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            ELSE (SELECT low FROM seen) END AS floor,
       (SELECT count(*) FROM hits) < :need AND (SELECT n FROM seen) < :window AS exhausted;

-- name: search_mail_probe(query, phrase, identity, hi, need, keep)^
-- search_probe for mail, scoped to :identity like search_mail_walk.
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), me AS MATERIALIZED (
    SELECT id FROM identities WHERE name = :identity
), found AS MATERIALIZED (
    SELECT m.id, COALESCE(m.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM mail AS m
    WHERE m.search_vector @@ (SELECT tsq FROM q)
      AND (CAST(:identity AS text) IS NULL
           OR m.sender_id = (SELECT id FROM me)
           OR :identity = ANY(m.recipients))
), hits AS MATERIALIZED (
    SELECT found.*
    FROM found
    WHERE found.id < :hi
    ORDER BY found.id DESC
    LIMIT :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            END AS floor;

-- name: search_mail_probe_range(query, phrase, identity, lo, hi, need, keep)^
-- search_probe_range for mail, scoped to :identity like search_mail_walk.
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq,
           CASE WHEN CAST(:phrase AS boolean) THEN phraseto_tsquery('english', :query) END AS phr
), me AS MATERIALIZED (
    SELECT id FROM identities WHERE name = :identity
), found AS MATERIALIZED (
    SELECT m.id, COALESCE(m.search_vector @@ (SELECT phr FROM q), false) AS phrase
    FROM mail AS m
    WHERE m.search_vector @@ (SELECT tsq FROM q)
      AND m.id >= :lo AND m.id < :hi
      AND (CAST(:identity AS text) IS NULL
           OR m.sender_id = (SELECT id FROM me)
           OR :identity = ANY(m.recipients))
), hits AS MATERIALIZED (
    SELECT found.*
    FROM found
    ORDER BY found.id DESC
    LIMIT :need
)
SELECT (SELECT count(*) FROM hits) AS found,
       ARRAY(SELECT id FROM hits ORDER BY id DESC LIMIT :keep) AS ids,
       ARRAY(SELECT id FROM hits WHERE phrase ORDER BY id DESC) AS phrase_ids,
       CASE WHEN (SELECT count(*) FROM hits) >= :need THEN (SELECT min(id) FROM hits)
            ELSE CAST(:lo AS bigint) END AS floor;

-- name: search_terms(query)^
-- The tsquery that search_messages runs for :query, as text ('parser' & !'lexer'): empty when
-- the query has no searchable word (empty, only stop words such as "the", only punctuation).
SELECT websearch_to_tsquery('english', :query)::text AS terms;
