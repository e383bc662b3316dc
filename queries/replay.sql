-- name: session_live_events(session_id)
-- Events after the session's newest clear, in id order: what replay needs and nothing more.
-- The newest clear is one backward probe of idx_messages_session_clear. The range is written as
-- row comparisons on (session_id, id) so only idx_messages_session can serve it: a plain
-- "session_id = s AND id > c" lets the planner (assuming the two independent) walk the primary
-- key over every later event of every session and filter, which grows with other sessions' writes.
-- The equality on session_id besides is for Citus: it routes a query to one shard only on an
-- equality on the distribution column (docs/concepts/citus.md).
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM messages
WHERE session_id = :session_id
  AND (session_id, id) > (
        :session_id,
        COALESCE(
            (SELECT max(id) FROM messages WHERE session_id = :session_id AND kind = 'clear'), 0))
  AND (session_id, id) <= (:session_id, 9223372036854775807)
ORDER BY session_id, id;

-- name: session_replay_tail(session_id, lim)
-- The newest :lim events of replay_session's context (all of them when :lim is NULL), in id
-- order, in one statement whose cost does not grow with the session's length. It folds only the
-- events that move the context after the newest clear (mark, rewind, pop: migration 0020's
-- partial index, a handful in a session of 100,000), exactly as replay.fold does:
-- - stack: the marks on the stack; a mark is pushed; a rewind whose target is on the stack cuts
--   back to it (its span (mark, rewind) is cut); a pop whose target is in the context removes it
--   (and from the stack, if a mark);
-- - gone: the ids no longer (or never) in the context besides the cut spans: popped targets and
--   rewinds replay skipped. A pop's target is in the context when it is an event of the session
--   after the newest clear and before the pop, not a clear or a pop, not gone and not cut.
-- Then it reads the newest events of each stretch between cut spans (spans nest or are apart:
-- a rewind's mark is in the context, so never inside an earlier span), at most :lim from each.
-- :lim is read through a subquery, which the planner does not look into: every plan assumes
-- the same limit, so the prepared statement settles on one generic plan instead of planning
-- this long statement again on every call (custom plans: 1.6 ms a call saved at 50 items).
-- The control events are gathered into arrays once (MATERIALIZED: referenced once, the CTE
-- would otherwise be inlined into the fold's step and gathered again at every step; the fold
-- reads the n-th element of each array). The fold terminates: each step takes the next control event (n + 1) and it stops
-- after the last (n < total).
WITH RECURSIVE
wall AS (
    SELECT COALESCE(max(id), 0) AS id
    FROM messages
    WHERE session_id = :session_id AND kind = 'clear'
),
controls AS MATERIALIZED (
    SELECT count(*) AS total,
           array_agg(c.id ORDER BY c.id) AS ids,
           array_agg(c.kind ORDER BY c.id) AS kinds,
           array_agg(t.id ORDER BY c.id) AS targets,
           array_agg(t.kind ORDER BY c.id) AS target_kinds
    FROM wall
    JOIN messages AS c
      ON c.session_id = :session_id
     AND (c.session_id, c.id) > (:session_id, wall.id)
     AND (c.session_id, c.id) <= (:session_id, 9223372036854775807)
     AND c.kind IN ('mark', 'rewind', 'pop')
    LEFT JOIN messages AS t
      ON t.id = CASE WHEN jsonb_typeof(c.data -> 'target_message_id') = 'number'
                          AND (c.data ->> 'target_message_id') ~ '^-?[0-9]{1,18}$'
                     THEN CAST(c.data ->> 'target_message_id' AS bigint) END
     AND t.session_id = :session_id AND t.id > wall.id AND t.id < c.id
),
fold (n, stack, lo, hi, gone) AS (
    SELECT CAST(0 AS bigint), CAST('{}' AS bigint[]), CAST('{}' AS bigint[]),
           CAST('{}' AS bigint[]), CAST('{}' AS bigint[])
    UNION ALL
    SELECT f.n + 1,
           CASE WHEN c.kind = 'mark' THEN f.stack || c.id
                WHEN c.kind = 'rewind' AND v.on_stack
                    THEN trim_array(f.stack,
                                    cardinality(f.stack) - array_position(f.stack, c.target))
                WHEN c.kind = 'pop' AND v.in_context THEN array_remove(f.stack, c.target)
                ELSE f.stack END,
           CASE WHEN c.kind = 'rewind' AND v.on_stack THEN f.lo || c.target ELSE f.lo END,
           CASE WHEN c.kind = 'rewind' AND v.on_stack THEN f.hi || c.id ELSE f.hi END,
           CASE WHEN c.kind = 'rewind' AND NOT v.on_stack THEN f.gone || c.id
                WHEN c.kind = 'pop' AND v.in_context THEN f.gone || c.target
                ELSE f.gone END
    FROM fold AS f
    CROSS JOIN controls AS a
    CROSS JOIN LATERAL (
        SELECT a.ids[f.n + 1] AS id, a.kinds[f.n + 1] AS kind, a.targets[f.n + 1] AS target,
               a.target_kinds[f.n + 1] AS target_kind
    ) AS c
    CROSS JOIN LATERAL (
        SELECT COALESCE(c.target = ANY (f.stack), false) AS on_stack,
               COALESCE(c.target_kind NOT IN ('clear', 'pop') AND c.target <> ALL (f.gone)
                        AND NOT EXISTS (SELECT 1 FROM unnest(f.lo, f.hi) AS s (lo, hi)
                                        WHERE s.lo < c.target AND c.target < s.hi),
                        false) AS in_context
    ) AS v
    WHERE f.n < a.total
),
folded AS (
    SELECT lo, hi, gone FROM fold ORDER BY n DESC LIMIT 1
),
cuts AS (
    SELECT s.lo, s.hi FROM folded, unnest(folded.lo, folded.hi) AS s (lo, hi)
),
outer_cuts AS (
    SELECT c.lo, c.hi FROM cuts AS c
    WHERE NOT EXISTS (SELECT 1 FROM cuts AS d
                      WHERE d.lo <= c.lo AND c.hi <= d.hi AND d.hi <> c.hi)
),
stretches AS (
    SELECT COALESCE(lag(o.hi) OVER (ORDER BY o.lo), wall.id + 1) AS first_id, o.lo AS last_id
    FROM outer_cuts AS o, wall
    UNION ALL
    SELECT COALESCE((SELECT max(o.hi) FROM outer_cuts AS o), wall.id + 1),
           9223372036854775807
    FROM wall
),
tail AS (
    SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, m.data, m.created_at
    FROM stretches AS r
    CROSS JOIN folded
    CROSS JOIN LATERAL (
        SELECT e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at
        FROM messages AS e
        WHERE e.session_id = :session_id
          AND (e.session_id, e.id) >= (:session_id, r.first_id)
          AND (e.session_id, e.id) <= (:session_id, r.last_id)
          AND e.kind <> 'pop' AND e.id <> ALL (folded.gone)
        ORDER BY e.session_id DESC, e.id DESC
        LIMIT (SELECT CAST(:lim AS bigint))
    ) AS m
    ORDER BY m.id DESC
    LIMIT (SELECT CAST(:lim AS bigint))
)
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM tail
ORDER BY id;
