-- name: create_agent(uuid, session_id, name, provider, model, thinking_level)^
-- Register a root agent (no parent, nothing inherited) in a session that has not ended; returns
-- the row, or nothing when the session is missing or ended (its row is locked FOR KEY SHARE,
-- as by an append: a concurrent end_session waits or is seen).
WITH s AS (
    SELECT s.id
    FROM sessions AS s
    WHERE s.id = :session_id AND s.ended_at IS NULL
    FOR KEY SHARE OF s
)
INSERT INTO agents (uuid, session_id, name, provider, model, thinking_level)
SELECT :uuid, s.id, :name, :provider, :model, :thinking_level
FROM s
RETURNING id, uuid, session_id, name, parent_uuid, fork_message_id, status, created_at,
          ended_at, provider, model, thinking_level, idle;

-- name: fork_agent(uuid, parent_uuid, name, provider, model, thinking_level)^
-- Register a child of a running agent: exactly one row, no message copied. Its fork point is
-- the parent's newest own event (one backward probe of idx_messages_agent), or 0 when the
-- parent has none ("inherits none of the parent's own events"). Unset provider, model and
-- thinking_level are inherited from the parent. Nothing is returned if the parent is missing
-- or not running, or its session has ended (the parent's row locked FOR SHARE, the
-- session's FOR KEY SHARE, as for appends). The rows are locked in a CTE and the insert reads
-- it (Citus runs an INSERT ... SELECT that locks rows only in that shape); the fork point is
-- read by uuid, so on Citus it asks every shard (a fork is rare; docs/concepts/citus.md).
WITH p AS (
    SELECT p.uuid, p.session_id, p.provider, p.model, p.thinking_level
    FROM agents AS p
    JOIN sessions AS s ON s.id = p.session_id
    WHERE p.uuid = :parent_uuid AND p.status = 'running' AND s.ended_at IS NULL
    FOR SHARE OF p FOR KEY SHARE OF s
),
fork AS (
    SELECT COALESCE(max(m.id), 0) AS id
    FROM messages AS m
    WHERE m.agent_uuid = :parent_uuid
)
INSERT INTO agents (uuid, session_id, name, parent_uuid, fork_message_id, provider, model,
                    thinking_level)
SELECT :uuid, p.session_id, :name, p.uuid, fork.id,
       COALESCE(:provider, p.provider), COALESCE(:model, p.model),
       COALESCE(:thinking_level, p.thinking_level)
FROM p CROSS JOIN fork
RETURNING id, uuid, session_id, name, parent_uuid, fork_message_id, status, created_at,
          ended_at, provider, model, thinking_level, idle;

-- name: get_agent(uuid)^
-- One agent by uuid, or nothing.
SELECT id, uuid, session_id, name, parent_uuid, fork_message_id, status, created_at, ended_at,
       provider, model, thinking_level, idle
FROM agents
WHERE uuid = :uuid;

-- name: running_agents(session_id)
-- Running agents (of one session, or all), parents before children: a child is always
-- registered after its parent, so creation order (id) is enough and has no ties.
SELECT id, uuid, session_id, name, parent_uuid, fork_message_id, status, created_at, ended_at,
       provider, model, thinking_level, idle
FROM agents
WHERE status = 'running'
  AND (CAST(:session_id AS bigint) IS NULL OR session_id = :session_id)
ORDER BY id;

-- name: agent_children(uuid)
-- Direct children of an agent, oldest first.
SELECT id, uuid, session_id, name, parent_uuid, fork_message_id, status, created_at, ended_at,
       provider, model, thinking_level, idle
FROM agents
WHERE parent_uuid = :uuid
ORDER BY id;

-- name: kill_agent(uuid)
-- Mark an agent and every running descendant dead; returns the uuids changed, parents first.
-- The walk terminates: parent_uuid only points at rows created earlier, so there is no cycle.
WITH RECURSIVE subtree (uuid) AS (
    SELECT uuid FROM agents WHERE uuid = :uuid
    UNION ALL
    SELECT a.uuid FROM agents AS a JOIN subtree AS s ON a.parent_uuid = s.uuid
)
UPDATE agents AS a
SET status = 'dead', ended_at = NOW(), idle = false
FROM subtree
WHERE a.uuid = subtree.uuid AND a.status = 'running'
RETURNING a.id, a.uuid;

-- name: reap_agent(uuid)^
-- Move a dead agent to reaped (a reaped one stays reaped); returns its status afterwards.
UPDATE agents
SET status = CASE WHEN status = 'dead' THEN 'reaped' ELSE status END
WHERE uuid = :uuid
RETURNING status;

-- name: set_agent_idle(uuid, idle)^
-- Set or clear an agent's idle flag; returns the uuid, or nothing if missing.
UPDATE agents SET idle = :idle WHERE uuid = :uuid RETURNING uuid;

-- name: update_agent_model(uuid, set_provider, provider, set_model, model, set_thinking, thinking_level)^
-- Change the provider, model and/or thinking level (only the fields flagged), returning the row.
UPDATE agents
SET provider = CASE WHEN :set_provider THEN :provider ELSE provider END,
    model = CASE WHEN :set_model THEN :model ELSE model END,
    thinking_level = CASE WHEN :set_thinking THEN :thinking_level ELSE thinking_level END
WHERE uuid = :uuid
RETURNING id, uuid, session_id, name, parent_uuid, fork_message_id, status, created_at,
          ended_at, provider, model, thinking_level, idle;

-- name: lock_session(session_id)^
-- Lock a session's row for the rest of the transaction (serialises ensure_root_agent); returns
-- whether it has ended, or nothing if it does not exist.
SELECT id, ended_at IS NOT NULL AS ended FROM sessions WHERE id = :session_id FOR UPDATE;

-- name: session_root_agent(session_id)^
-- The session's oldest running root agent ("agent zero"), or nothing: a dead root is never
-- returned (ensure_root_agent then creates a new one).
SELECT id, uuid, session_id, name, parent_uuid, fork_message_id, status, created_at, ended_at,
       provider, model, thinking_level, idle
FROM agents
WHERE session_id = :session_id AND parent_uuid IS NULL AND status = 'running'
ORDER BY id
LIMIT 1;

-- name: adopt_orphan_messages(session_id, uuid)^
-- Give a session's events that have no agent to its root agent; returns how many.
WITH adopted AS (
    UPDATE messages SET agent_uuid = :uuid
    WHERE session_id = :session_id AND agent_uuid IS NULL
    RETURNING 1
)
SELECT count(*) AS adopted FROM adopted;

-- name: find_clear(agent_uuid, max_id)^
-- The agent's newest own clear with id <= max_id (no bound when NULL), 0 if none: one backward
-- probe of idx_messages_agent_clear.
SELECT COALESCE(max(id), 0) AS clear_id
FROM messages
WHERE agent_uuid = :agent_uuid AND kind = 'clear'
  AND (CAST(:max_id AS bigint) IS NULL OR id <= :max_id);

-- name: query_range(agent_uuid, start_id, end_id)
-- One replay range: the agent's own events with start_id < id <= end_id (no upper bound when
-- end_id is NULL), in id order. Row comparisons keep it on idx_messages_agent.
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM messages
WHERE (agent_uuid, id) > (:agent_uuid, :start_id)
  AND (agent_uuid, id) <= (:agent_uuid, COALESCE(CAST(:end_id AS bigint), 9223372036854775807))
ORDER BY agent_uuid, id;

-- name: replay_ranges(agent_uuid)
-- The ranges of the agent's virtual history that follow its newest clear, root first: the one
-- lineage walk, agent_replay_ranges() (migration 0005, where it says why it terminates).
SELECT agent_uuid, start_id, end_id
FROM agent_replay_ranges(:agent_uuid)
ORDER BY depth DESC;

-- name: replay_agent_events(agent_uuid)
-- Everything lineage replay needs in one round trip: agent_replay_events() (migration 0030)
-- reads the agent's session, then the lineage walk's ranges joined to their events, in one
-- statement bounded by that session (one shard on Citus), root range first, id order
-- within. An empty range yields one row of NULLs, so "no rows" means "no such agent".
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM agent_replay_events(:agent_uuid);
