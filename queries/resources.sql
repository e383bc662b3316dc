-- MCP resource subscriptions (ikigai_store/mcp/resources.py): what a server needs to map a
-- subscribed resource to the notifications of migration 0017, and its session_listeners rows.
-- A server process is one listener (a UUID); its rows live until expires_at, which it pushes
-- forward while a client watches the session, so a server that dies leaves rows that expire.

-- name: resource_thread_hash(thread_id)^
-- The id ikigai_thread notifications name a thread by: hashtext(thread_id) (migration 0017).
SELECT hashtext(:thread_id) AS hash;

-- name: session_listeners_register(session_ids, listener, ttl)^
-- Register :listener for the sessions :session_ids (those that exist) until :ttl from now, or
-- push an existing registration's expiry forward, and push each session's listened_until
-- (migration 0024) to at least that expiry: appends to them then notify ikigai_session
-- (queries/messages.sql). The session rows are locked first, in id order (two registrations
-- of overlapping sessions cannot deadlock); appends lock them FOR KEY SHARE, which this does
-- not wait for. Returns how many sessions are registered.
WITH locked AS (
    SELECT id FROM sessions WHERE id = ANY(:session_ids) ORDER BY id FOR NO KEY UPDATE
), registered AS (
    INSERT INTO session_listeners (session_id, listener, expires_at)
    SELECT id, :listener, ikigai_now() + CAST(:ttl AS interval)
    FROM locked
    ON CONFLICT (session_id, listener) DO UPDATE SET expires_at = excluded.expires_at
    RETURNING session_id, expires_at
), marked AS (
    UPDATE sessions AS s
    SET listened_until = GREATEST(s.listened_until, r.expires_at)
    FROM registered AS r
    WHERE s.id = r.session_id
    RETURNING s.id
)
SELECT count(*) AS registered FROM marked;

-- name: session_listeners_unregister(session_ids, listener)^
-- Remove :listener's registrations for :session_ids (nobody watches them here anymore).
-- listened_until stays: it only moves forward (a concurrent registration could not be told
-- apart from a stale one in this statement's snapshot), so appends go on notifying until it
-- lapses, at most one TTL. Returns how many were removed.
WITH removed AS (
    DELETE FROM session_listeners
    WHERE listener = :listener AND session_id = ANY(:session_ids)
    RETURNING session_id
)
SELECT count(*) AS removed FROM removed;

-- name: session_listeners_prune()^
-- Remove every listener's expired registrations (left by servers that stopped without
-- unregistering; they already notify nothing). Returns how many were removed.
WITH removed AS (
    DELETE FROM session_listeners
    WHERE expires_at <= ikigai_now()
    RETURNING session_id
)
SELECT count(*) AS removed FROM removed;
