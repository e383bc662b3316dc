-- name: session_live_events(session_id)
-- Events after the session's newest clear, in id order: what replay needs and nothing more.
-- The newest clear is one backward probe of idx_messages_session_clear. The range is written as
-- row comparisons on (session_id, id) so only idx_messages_session can serve it: a plain
-- "session_id = s AND id > c" lets the planner (assuming the two independent) walk the primary
-- key over every later event of every session and filter, which grows with other sessions' writes.
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM messages
WHERE (session_id, id) > (
        :session_id,
        COALESCE(
            (SELECT max(id) FROM messages WHERE session_id = :session_id AND kind = 'clear'), 0))
  AND (session_id, id) <= (:session_id, 9223372036854775807)
ORDER BY session_id, id;
