-- name: session_live_events(session_id)
-- Events after the session's newest clear, in id order: what replay needs and nothing more.
-- The newest clear is one backward probe of idx_messages_session_clear; the range read uses
-- idx_messages_session, so the cost follows the live context, not the whole history.
SELECT id, session_id, kind, content, data, created_at
FROM messages
WHERE session_id = :session_id
  AND id > COALESCE(
      (SELECT max(id) FROM messages WHERE session_id = :session_id AND kind = 'clear'), 0)
ORDER BY id;
