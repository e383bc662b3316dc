-- Appends stop probing session_listeners (issue 22, the append hot path): whether anyone
-- listens to a session is read from the session row the append already locks.
-- - sessions.listened_until: until when some server may listen to the session (NULL: never
--   registered). Registering a listener (queries/resources.sql) pushes it forward to the new
--   registration's expiry; it never moves back, so it is never earlier than the expiry of a
--   session_listeners row of the session (it may be later: a listener that left still gets
--   notifications nobody needs until it lapses, at most one registration TTL). An append
--   notifies ikigai_session when listened_until is in the future, as it did when a
--   session_listeners row had not expired. The probe cost 25-55 us per append: a second
--   relation and its index opened, scanned and locked in every append's plan.
-- - Appends now lock the session row FOR KEY SHARE (queries/messages.sql), which a
--   registration's UPDATE (FOR NO KEY UPDATE) does not wait for, so a registration never
--   waits behind an open append transaction. What an append must wait for locks FOR UPDATE:
--   end_session, batch appends, pop, session_wait_appends (queries/sessions.sql,
--   messages.sql, agents.sql).
-- Idempotent.
-- depends: 0023-mail-unread-row-trigger

ALTER TABLE sessions ADD COLUMN IF NOT EXISTS listened_until TIMESTAMPTZ;

UPDATE sessions AS s
SET listened_until = l.until
FROM (SELECT session_id, max(expires_at) AS until
      FROM session_listeners GROUP BY session_id) AS l
WHERE s.id = l.session_id
  AND (s.listened_until IS NULL OR s.listened_until < l.until);

UPDATE schema_metadata SET schema_version = 24 WHERE schema_version < 24;
