-- name: create_session(title)^
-- Start a session (Model B: it stays active across launches until ended); returns the row.
INSERT INTO sessions (title)
VALUES (:title)
RETURNING id, started_at, ended_at, title;

-- name: get_session(session_id)^
-- One session by id, or nothing.
SELECT id, started_at, ended_at, title
FROM sessions
WHERE id = :session_id;

-- name: get_active_session()^
-- The most recently started session that has not ended and that no runtime owns: not named by a
-- key (session_keys: the OpenAI Agents SDK's sessions, session_for_key), not a LangGraph thread,
-- not a Claude Agent SDK transcript. Those are never ended, and are found by their key. id
-- breaks started_at ties (NOW() is frozen per transaction).
SELECT s.id, s.started_at, s.ended_at, s.title
FROM sessions AS s
WHERE s.ended_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM session_keys AS k WHERE k.session_id = s.id)
  AND NOT EXISTS (SELECT 1 FROM langgraph_threads AS t WHERE t.session_id = s.id)
  AND NOT EXISTS (SELECT 1 FROM claude_transcripts AS c WHERE c.session_id = s.id)
ORDER BY s.started_at DESC, s.id DESC
LIMIT 1;

-- name: list_sessions(limit)
-- Sessions, newest first.
SELECT id, started_at, ended_at, title
FROM sessions
ORDER BY started_at DESC, id DESC
LIMIT :limit;

-- name: end_session(session_id)^
-- Mark a session ended; ending it again keeps the first ended_at (LEAST ignores a NULL and keeps
-- the earlier time; Citus refuses NOW() inside COALESCE in an UPDATE of a distributed or
-- reference table). Nothing returned if missing.
-- The row is locked FOR UPDATE before it is changed: appends lock it FOR KEY SHARE
-- (queries/messages.sql), which a plain UPDATE of a non-key column neither waits for nor makes
-- wait. FOR UPDATE waits for the appends in flight, and an update by a transaction holding it
-- counts as a key update, so appends that come later wait for this one and then see the
-- session ended (READ COMMITTED re-checks the locked row's newest version).
UPDATE sessions
SET ended_at = LEAST(ended_at, NOW())
WHERE id = (SELECT id FROM sessions WHERE id = :session_id FOR UPDATE)
RETURNING id, started_at, ended_at, title;

-- name: set_session_title(session_id, title)^
-- Set or clear (NULL) a session's title. Nothing returned if the session is missing.
UPDATE sessions
SET title = :title
WHERE id = :session_id
RETURNING id, started_at, ended_at, title;

-- name: session_for_key(namespace, key, title)^
-- The session (namespace, key) names, created (with :title) and named so when there is none,
-- in one statement: when two first uses race, the second's key insert waits for the first and
-- fails on session_keys' primary key, which undoes its whole statement (no session is left
-- behind unnamed); the caller runs it again and finds the first one's.
WITH found AS (
    SELECT session_id FROM session_keys WHERE namespace = :namespace AND key = :key
),
created AS (
    INSERT INTO sessions (title)
    SELECT :title WHERE NOT EXISTS (SELECT 1 FROM found)
    RETURNING id
),
named AS (
    INSERT INTO session_keys (namespace, key, session_id)
    SELECT :namespace, :key, id FROM created
    RETURNING session_id
)
SELECT session_id FROM found
UNION ALL
SELECT session_id FROM named;

-- name: session_wait_appends(session_id)^
-- Wait until every append to the session in flight has committed or rolled back: each holds
-- the session row FOR KEY SHARE from before it takes its id (queries/messages.sql), and FOR
-- UPDATE conflicts with it; appends that start meanwhile wait for this transaction and
-- take later ids. So the events read next in this transaction (a new snapshot, READ
-- COMMITTED) up to the newest id read are all there will ever be: a follower resuming from
-- that id skips nothing (BIGSERIAL ids alone commit out of order). Used by the web view's
-- timeline tail and by export_session's horizon. No row: no such session.
SELECT s.id FROM sessions AS s WHERE s.id = :session_id FOR UPDATE;
