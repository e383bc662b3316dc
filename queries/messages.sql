-- name: append_message(session_id, agent_uuid, kind, content, data)^
-- Append one event; returns the stored row. Rows are never updated: id is the order.
-- The foreign keys reject a missing session and an agent that is not one of that session's.
-- data is JSON text, validated and serialised once by the caller.
INSERT INTO messages (session_id, agent_uuid, kind, content, data)
VALUES (:session_id, :agent_uuid, :kind, :content, CAST(:data AS jsonb))
RETURNING id, session_id, agent_uuid, kind, content, data, created_at;

-- name: append_rewind(session_id, agent_uuid, content, data, target_message_id)^
-- Append a rewind only if its target is a mark event of the same session; nothing is returned
-- (and nothing written) otherwise. One statement, so the check cannot race the insert.
INSERT INTO messages (session_id, agent_uuid, kind, content, data)
SELECT :session_id, :agent_uuid, 'rewind', :content, CAST(:data AS jsonb)
WHERE EXISTS (
    SELECT 1 FROM messages
    WHERE id = :target_message_id AND session_id = :session_id AND kind = 'mark'
)
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
-- True when the session exists.
SELECT EXISTS (SELECT 1 FROM sessions WHERE id = :session_id) AS exists;
