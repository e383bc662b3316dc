-- name: append_message(session_id, agent_uuid, kind, content, data, target_message_id)^
-- Append one event; returns the stored row, or nothing when the write is refused: the session
-- is missing or ended, agent_uuid is not a running agent of that session, or (a rewind, when
-- target_message_id is given) the target is not a mark event of the same session. One
-- statement, so no check can race the insert; the rows checked are locked FOR SHARE until
-- commit, so a concurrent end_session or kill_agent either waits for this append or is seen by
-- it (READ COMMITTED re-checks a locked row's newest version): no event lands in an ended
-- session or on a dead agent. data is JSON text, validated and serialised once by the caller.
-- Rows are never updated: id is the order.
INSERT INTO messages (session_id, agent_uuid, kind, content, data)
SELECT s.id, :agent_uuid, :kind, :content, CAST(:data AS jsonb)
FROM sessions AS s
WHERE s.id = :session_id AND s.ended_at IS NULL
  AND (CAST(:agent_uuid AS text) IS NULL OR EXISTS (
        SELECT 1 FROM agents AS a
        WHERE a.uuid = :agent_uuid AND a.session_id = s.id AND a.status = 'running'
        FOR SHARE))
  AND (CAST(:target_message_id AS bigint) IS NULL OR EXISTS (
        SELECT 1 FROM messages AS m
        WHERE m.id = :target_message_id AND m.session_id = s.id AND m.kind = 'mark'))
FOR SHARE OF s
RETURNING id, session_id, agent_uuid, kind, content, data, created_at;

-- name: session_messages(session_id)
-- The full audit trail of a session, in id order.
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM messages
WHERE session_id = :session_id
ORDER BY id;

-- name: count_session_messages(session_id)^
-- How many events a session has.
SELECT count(*) AS count FROM messages WHERE session_id = :session_id;

-- name: session_exists(session_id)^
-- Whether the session exists, and whether it has ended (rare paths: why a write was refused).
SELECT EXISTS (SELECT 1 FROM sessions WHERE id = :session_id) AS exists,
       EXISTS (SELECT 1 FROM sessions WHERE id = :session_id AND ended_at IS NOT NULL) AS ended;
