-- name: append_message(session_id, agent_uuid, kind, content, data, target_message_id)^
-- Append one event; returns the stored row, or nothing (and writes nothing) when agent_uuid is
-- given but is not an agent of that session, or when target_message_id is given (a rewind) but
-- is not a mark event of that session. One statement, so the checks cannot race the insert.
-- Rows are never updated: id is the order. data is JSON text, serialised once by the caller.
INSERT INTO messages (session_id, agent_uuid, kind, content, data)
SELECT :session_id, :agent_uuid, :kind, :content, CAST(:data AS jsonb)
WHERE (CAST(:agent_uuid AS text) IS NULL
       OR EXISTS (SELECT 1 FROM agents WHERE uuid = :agent_uuid AND session_id = :session_id))
  AND (CAST(:target_message_id AS bigint) IS NULL
       OR EXISTS (SELECT 1 FROM messages
                  WHERE id = :target_message_id AND session_id = :session_id AND kind = 'mark'))
RETURNING id, session_id, agent_uuid, kind, content, data, created_at;

-- name: session_messages(session_id)
-- The full audit trail of a session, in id order.
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM messages
WHERE session_id = :session_id
ORDER BY id;

-- name: count_session_messages(session_id)$
-- How many events a session has.
SELECT count(*) FROM messages WHERE session_id = :session_id;

-- name: session_exists(session_id)$
-- True when the session exists.
SELECT EXISTS (SELECT 1 FROM sessions WHERE id = :session_id);

-- name: is_mark_of_session(message_id, session_id)$
-- True when the message is a mark event of that session.
SELECT EXISTS (
    SELECT 1 FROM messages WHERE id = :message_id AND session_id = :session_id AND kind = 'mark'
);
