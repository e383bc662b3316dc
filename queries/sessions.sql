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
-- The most recently started session that has not ended; id breaks started_at ties
-- (NOW() is frozen per transaction).
SELECT id, started_at, ended_at, title
FROM sessions
WHERE ended_at IS NULL
ORDER BY started_at DESC, id DESC
LIMIT 1;

-- name: list_sessions(limit)
-- Sessions, newest first.
SELECT id, started_at, ended_at, title
FROM sessions
ORDER BY started_at DESC, id DESC
LIMIT :limit;

-- name: end_session(session_id)^
-- Mark a session ended; ending it again keeps the first ended_at. Nothing returned if missing.
UPDATE sessions
SET ended_at = COALESCE(ended_at, NOW())
WHERE id = :session_id
RETURNING id, started_at, ended_at, title;

-- name: set_session_title(session_id, title)^
-- Set or clear (NULL) a session's title. Nothing returned if the session is missing.
UPDATE sessions
SET title = :title
WHERE id = :session_id
RETURNING id, started_at, ended_at, title;
