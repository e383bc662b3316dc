-- Summaries (migration 0011): agent summaries of an identity's work (seed 004's
-- agent_summaries), and the context summaries a runtime agent keeps of ranges of its replayable
-- history (newest 5 per agent). Newest means highest id.

-- name: summaries_add(identity, summary, delta, transcript_hash, cost_usd)^
-- Store a summary of an identity that exists and is not retired, and return it: one
-- INSERT ... VALUES whose identity id is ikigai_active_identity() (migration 0040, as
-- activities_record). It raises, and nothing is inserted, when the identity is missing
-- (IK404) or retired (IK400).
INSERT INTO agent_summaries AS s (identity_id, summary, delta, transcript_hash, cost_usd)
VALUES (ikigai_active_identity(CAST(:identity AS text), 'it gets no new summaries'),
        CAST(:summary AS text), CAST(:delta AS text), CAST(:transcript_hash AS text),
        CAST(:cost_usd AS double precision))
RETURNING s.id, CAST(:identity AS text) AS identity, s.summary, s.delta, s.transcript_hash,
          s.cost_usd, s.created_at;

-- name: summaries_history(identity, limit)
-- An identity's summaries, newest first, at most :limit (a backward walk of
-- agent_summaries_identity_idx).
SELECT id, identity, summary, delta, transcript_hash, cost_usd, created_at
FROM ikigai_summary_history(:identity, CAST(:limit AS bigint));

-- name: summaries_identity_state(identity)^
-- Whether an identity exists and is retired (the rare paths of summaries_add and of empty
-- histories). No row: no such identity.
SELECT retired_at IS NOT NULL AS retired FROM identities WHERE name = :identity;

-- name: summaries_prune(identity, keep, older_than)^
-- Keep the newest :keep summaries of each identity (of one identity when :identity is not
-- NULL) and delete the others older than :older_than (any age when NULL), in one statement;
-- returns how many were deleted.
WITH ranked AS (
    SELECT s.id, s.created_at,
           row_number() OVER (PARTITION BY s.identity_id ORDER BY s.id DESC) AS n
    FROM agent_summaries AS s
    WHERE CAST(:identity AS text) IS NULL
       OR s.identity_id = (SELECT id FROM identities WHERE name = :identity)
), gone AS (
    DELETE FROM agent_summaries AS s
    USING ranked
    WHERE s.id = ranked.id AND ranked.n > :keep
      AND (CAST(:older_than AS interval) IS NULL
           OR ranked.created_at < ikigai_now() - CAST(:older_than AS interval))
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone;

-- name: summaries_lock_agent(agent_uuid)^
-- Serialise context-summary writes of one agent until commit (transaction-scoped advisory
-- lock), so that keeping the newest 5 never leaves more under concurrent adds.
SELECT pg_advisory_xact_lock(hashtextextended('context_summaries:' || :agent_uuid, 11))
       IS NOT NULL AS locked;

-- name: summaries_add_context(agent_uuid, summary, start_msg_id, end_msg_id, token_count)^
-- Store a context summary when both ends are messages of the agent's replayable history:
-- the ranges agent_replay_ranges() gives (the agent's own events and its ancestors' up to each
-- fork point, after the newest clear; start_id exclusive, end_id inclusive, NULL unbounded).
-- Each end is one primary-key probe of messages. No row: the agent is missing, an end is not
-- in that history, or the range is already summarised (summaries.py tells which).
INSERT INTO context_summaries (agent_uuid, summary, start_msg_id, end_msg_id, token_count)
SELECT :agent_uuid, :summary, :start_msg_id, :end_msg_id, :token_count
WHERE (SELECT count(*)
       FROM messages AS m
       JOIN agent_replay_ranges(:agent_uuid) AS r
         ON m.agent_uuid = r.agent_uuid AND m.id > r.start_id
        AND (r.end_id IS NULL OR m.id <= r.end_id)
       WHERE m.id IN (:start_msg_id, :end_msg_id)) = 2 - CAST(:start_msg_id = :end_msg_id AS int)
ON CONFLICT (agent_uuid, start_msg_id, end_msg_id) DO NOTHING
RETURNING id, agent_uuid, summary, start_msg_id, end_msg_id, token_count, created_at;

-- name: summaries_context_refusal(agent_uuid, start_msg_id, end_msg_id)^
-- Why summaries_add_context wrote nothing (rare path): whether the agent exists, whether each
-- end is in its replayable history, and the summary already stored for the range (if any).
SELECT EXISTS (SELECT 1 FROM agents WHERE uuid = :agent_uuid) AS agent_exists,
       EXISTS (SELECT 1
               FROM messages AS m
               JOIN agent_replay_ranges(:agent_uuid) AS r
                 ON m.agent_uuid = r.agent_uuid AND m.id > r.start_id
                AND (r.end_id IS NULL OR m.id <= r.end_id)
               WHERE m.id = :start_msg_id) AS start_visible,
       EXISTS (SELECT 1
               FROM messages AS m
               JOIN agent_replay_ranges(:agent_uuid) AS r
                 ON m.agent_uuid = r.agent_uuid AND m.id > r.start_id
                AND (r.end_id IS NULL OR m.id <= r.end_id)
               WHERE m.id = :end_msg_id) AS end_visible,
       c.id, c.agent_uuid, c.summary, c.start_msg_id, c.end_msg_id, c.token_count, c.created_at
FROM (SELECT 1) AS one
LEFT JOIN context_summaries AS c
       ON c.agent_uuid = :agent_uuid AND c.start_msg_id = :start_msg_id
      AND c.end_msg_id = :end_msg_id;

-- name: summaries_prune_context(agent_uuid, keep)^
-- Keep an agent's newest :keep context summaries, delete the others; returns how many.
WITH ranked AS (
    SELECT id, row_number() OVER (ORDER BY id DESC) AS n
    FROM context_summaries
    WHERE agent_uuid = :agent_uuid
), gone AS (
    DELETE FROM context_summaries AS c
    USING ranked
    WHERE c.id = ranked.id AND ranked.n > :keep
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone;

-- name: summaries_context(agent_uuid)
-- An agent's context summaries, newest first.
SELECT id, agent_uuid, summary, start_msg_id, end_msg_id, token_count, created_at
FROM context_summaries
WHERE agent_uuid = :agent_uuid
ORDER BY id DESC;

-- name: summaries_agent_exists(agent_uuid)^
-- One row when the runtime agent exists (context_summaries of an empty list).
SELECT 1 AS found FROM agents WHERE uuid = :agent_uuid;
