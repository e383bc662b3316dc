-- The web view (ikigai_store/web/): the reads its pages need that no operation offers, shaped
-- for a page: a bounded number of rows, long texts cut short in the database (an agent's 1 MB
-- body costs a page 2,000 characters, not a megabyte), and keyset paging by id so the hundredth
-- page of a big session costs what the first one does. Nothing here writes, except
-- web_session_tail's lock, which only waits for the session's appends in flight.

-- name: web_sessions(q, before_id, lim)
-- Sessions newest first: those whose title contains :q (case-insensitive; NULL: every
-- session; :q's % and _ are literal), with id below :before_id (NULL: from the newest), at
-- most :lim, with how many agents each has.
SELECT s.id, s.title, s.started_at, s.ended_at,
       (SELECT count(*) FROM agents AS a WHERE a.session_id = s.id) AS agents
FROM sessions AS s
WHERE (CAST(:q AS text) IS NULL
       OR strpos(lower(coalesce(s.title, '')), lower(CAST(:q AS text))) > 0
       OR CAST(s.id AS text) = :q)
  AND (CAST(:before_id AS bigint) IS NULL OR s.id < :before_id)
ORDER BY s.id DESC
LIMIT :lim;

-- name: web_events_before(session_id, before_id, lim)
-- A page of a session's events, newest first: id below :before_id, at most :lim, content and
-- data cut to 2,000 characters (content_length and data_length give the full lengths).
SELECT m.id, m.agent_uuid, m.kind, left(m.content, 2000) AS content,
       length(m.content) AS content_length,
       left(CAST(m.data AS text), 2000) AS data, length(CAST(m.data AS text)) AS data_length,
       m.created_at
FROM messages AS m
WHERE m.session_id = :session_id AND m.id < :before_id
ORDER BY m.id DESC
LIMIT :lim;

-- name: web_events_after(session_id, after_id, lim)
-- web_events_before, oldest first from just after :after_id.
SELECT m.id, m.agent_uuid, m.kind, left(m.content, 2000) AS content,
       length(m.content) AS content_length,
       left(CAST(m.data AS text), 2000) AS data, length(CAST(m.data AS text)) AS data_length,
       m.created_at
FROM messages AS m
WHERE m.session_id = :session_id AND m.id > :after_id
ORDER BY m.id
LIMIT :lim;

-- name: web_event(message_id)^
-- One event, whole (its own page).
SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, CAST(m.data AS text) AS data,
       m.created_at
FROM messages AS m
WHERE m.id = :message_id;

-- name: web_session_controls(session_id)
-- The session's mark, rewind and clear events in id order (migration 0018's partial index):
-- all that decides which events replay keeps. Rows in messages' column order (Message).
SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, m.data, m.created_at
FROM messages AS m
WHERE m.session_id = :session_id AND m.kind IN ('mark', 'rewind', 'clear')
ORDER BY m.id;

-- name: web_lock_timeout()^
-- web_session_tail waits at most 200 ms for the appends in flight (this transaction only).
SELECT set_config('lock_timeout', '200ms', true) AS lock_timeout;

-- name: web_session_tail_lock(session_id)^
-- Wait until every append to the session in flight has committed or rolled back: each holds
-- the session row FOR SHARE from before it takes its id (queries/messages.sql) to its commit,
-- and FOR NO KEY UPDATE conflicts with it. Appends that start meanwhile wait for this
-- transaction and take later ids. So the events read next in this transaction above an id
-- are all there will ever be up to the newest one read: a follower resuming from the newest
-- id it saw skips nothing (BIGSERIAL ids alone commit out of order).
SELECT s.id FROM sessions AS s WHERE s.id = :session_id FOR NO KEY UPDATE;

-- name: web_agents(session_id)
-- Every agent of the session, oldest first, with the ids of the first and the newest event it
-- wrote itself (NULL: none; two probes of idx_messages_agent).
SELECT a.uuid, a.session_id, a.name, a.parent_uuid, a.fork_message_id, a.status,
       a.created_at, a.ended_at, a.provider, a.model, a.thinking_level, a.idle,
       (SELECT min(m.id) FROM messages AS m WHERE m.agent_uuid = a.uuid) AS first_id,
       (SELECT max(m.id) FROM messages AS m WHERE m.agent_uuid = a.uuid) AS last_id
FROM agents AS a
WHERE a.session_id = :session_id
ORDER BY a.id;
