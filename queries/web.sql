-- The web view (ikigai_store/web/): the reads its pages need that no operation offers, shaped
-- for a page: a bounded number of rows, long texts cut short in the database (an agent's 1 MB
-- body costs a page 2,000 characters, not a megabyte), and keyset paging by id so the hundredth
-- page of a big session costs what the first one does. Nothing here writes (the timeline's
-- tail also takes queries/sessions.sql's session_wait_appends, which only waits).

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
-- The session's mark, rewind, clear and pop events (migration 0020's partial index), and the
-- events of the session the pops aim at (a primary-key probe each), in id order: all that
-- decides which events replay keeps. Rows in messages' column order (Message).
WITH controls AS (
    SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, m.data, m.created_at
    FROM messages AS m
    WHERE m.session_id = :session_id AND m.kind IN ('mark', 'rewind', 'clear', 'pop')
)
SELECT id, session_id, agent_uuid, kind, content, data, created_at FROM controls
UNION
SELECT t.id, t.session_id, t.agent_uuid, t.kind, t.content, t.data, t.created_at
FROM controls AS c
JOIN messages AS t
  ON t.id = CASE WHEN jsonb_typeof(c.data -> 'target_message_id') = 'number'
                      AND (c.data ->> 'target_message_id') ~ '^-?[0-9]{1,18}$'
                 THEN CAST(c.data ->> 'target_message_id' AS bigint) END
 AND t.session_id = :session_id
WHERE c.kind = 'pop'
ORDER BY id;

-- name: web_lock_timeout()^
-- web_session_tail waits at most 200 ms for the appends in flight (this transaction only).
SELECT set_config('lock_timeout', '200ms', true) AS lock_timeout;

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

-- The coordination pages (ikigai_store/web/reads.py): what a topic's, a queue's and the task
-- lists' pages show beside the operations' results. Same rules: bounded rows, texts cut.

-- name: web_mail(mail_id)^
-- One mail, whole (its own page): mail_view's row, as Mail reads it.
SELECT v.* FROM mail_view AS v WHERE v.id = :mail_id;

-- name: web_topic_subscribers(topic_id, lim)
-- A topic's subscribers by name, at most :lim, with the offset each committed (0: none) and
-- its lag: how many offsets of the log lie after it.
SELECT i.id, i.name, i.retired_at, s.subscribed_at,
       coalesce(o.last_offset, 0) AS committed,
       (t.next_offset - 1) - coalesce(o.last_offset, 0) AS lag,
       o.updated_at AS committed_at
FROM subscriptions AS s
JOIN identities AS i ON i.id = s.identity_id
JOIN topics AS t ON t.id = s.topic_id
LEFT JOIN consumer_offsets AS o ON o.identity_id = s.identity_id AND o.topic_id = s.topic_id
WHERE s.topic_id = :topic_id
ORDER BY i.name
LIMIT :lim;

-- name: web_queue_counts(topic_id)^
-- How many of a queue topic's messages are in each state.
SELECT count(*) FILTER (WHERE q.state = 'available') AS available,
       count(*) FILTER (WHERE q.state = 'claimed') AS claimed,
       count(*) FILTER (WHERE q.state = 'done') AS done,
       count(*) FILTER (WHERE q.state = 'dead') AS dead
FROM queue_items AS q
WHERE q.topic_id = :topic_id;

-- name: web_queue_claims(topic_id, lim)
-- A queue topic's claimed messages, oldest first, at most :lim: the holder, the attempt, the
-- lease's end and the seconds left of it by the database's clock (negative: expired, not yet
-- claimed again), the subject cut to 200 characters.
SELECT q.mail_id, left(m.subject, 200) AS subject, h.name AS holder, q.attempts AS attempt,
       q.lease_until,
       CAST(extract(epoch FROM q.lease_until - ikigai_now()) AS double precision) AS seconds_left
FROM queue_items AS q
JOIN mail AS m ON m.id = q.mail_id
LEFT JOIN identities AS h ON h.id = q.holder_id
WHERE q.topic_id = :topic_id AND q.outcome IS NULL AND q.state = 'claimed'  -- open_idx
ORDER BY q.mail_id
LIMIT :lim;

-- name: web_queue_dead(topic_id, lim)
-- topics.dead_letters for a page: oldest first, at most :lim, subject cut to 200 characters,
-- body and last error to 2,000.
SELECT q.mail_id, left(m.subject, 200) AS subject, left(m.body, 2000) AS body,
       length(m.body) AS body_length, s.name AS sender, m.created_at, q.attempts,
       left(q.last_error, 2000) AS last_error, q.updated_at
FROM queue_items AS q
JOIN mail AS m ON m.id = q.mail_id
JOIN identities AS s ON s.id = m.sender_id
WHERE q.topic_id = :topic_id AND q.outcome = 'dead'  -- state 'dead': queue_items_dead_idx
ORDER BY q.mail_id
LIMIT :lim;

-- name: web_topic_log(topic_id, lim)
-- A topic's newest :lim messages, newest first, subject cut to 200 characters, body to 500.
SELECT m.id, l.log_offset, s.name AS sender, left(m.subject, 200) AS subject,
       left(m.body, 500) AS body, length(m.body) AS body_length, m.priority, m.created_at
FROM topic_log AS l
JOIN mail AS m ON m.id = l.mail_id
JOIN identities AS s ON s.id = m.sender_id
WHERE l.topic_id = :topic_id AND l.log_offset IS NOT NULL  -- sequenced: the log as read
ORDER BY l.log_offset DESC
LIMIT :lim;

-- name: web_task_lists(lim)
-- Task lists, oldest first, at most :lim, with their owner and counts as task_stats_in_list
-- counts them (blocked: pending with a blocker neither completed nor deleted). The counts are
-- one aggregate grouped by list over the tasks of those lists (on Citus, where tasks are
-- distributed by list: every shard asked once, migration 0036), a list without tasks counting
-- zeros.
WITH shown AS MATERIALIZED (
    SELECT l.id, l.list_id, i.name AS owner, l.watch_path, l.created_at, l.last_synced_at
    FROM task_lists AS l
    JOIN identities AS i ON i.id = l.owner_id
    ORDER BY l.id
    LIMIT :lim
), c AS (
    SELECT s.list_id,
           count(*) AS total,
           count(*) FILTER (WHERE s.status = 'pending') AS pending,
           count(*) FILTER (WHERE s.status = 'in_progress') AS in_progress,
           count(*) FILTER (WHERE s.status = 'completed') AS completed,
           count(*) FILTER (WHERE s.status = 'deleted') AS deleted,
           count(*) FILTER (WHERE s.status = 'pending' AND s.owner IS NULL AND NOT s.blocked)
               AS available,
           count(*) FILTER (WHERE s.blocked) AS blocked
    FROM (SELECT t.list_id, t.status, t.owner,
                 t.status = 'pending'
                 AND EXISTS (SELECT 1
                             FROM task_deps AS d
                             JOIN tasks AS b ON b.list_id = d.list_id AND b.id = d.blocked_by_id
                             WHERE d.list_id = t.list_id AND d.task_id = t.id
                               AND b.status NOT IN ('completed', 'deleted')) AS blocked
          FROM tasks AS t
          WHERE t.list_id IN (SELECT id FROM shown)) AS s
    GROUP BY s.list_id
)
SELECT l.id, l.list_id, l.owner, l.watch_path, l.created_at, l.last_synced_at,
       COALESCE(c.total, 0) AS total, COALESCE(c.pending, 0) AS pending,
       COALESCE(c.in_progress, 0) AS in_progress, COALESCE(c.completed, 0) AS completed,
       COALESCE(c.deleted, 0) AS deleted, COALESCE(c.available, 0) AS available,
       COALESCE(c.blocked, 0) AS blocked
FROM shown AS l
LEFT JOIN c ON c.list_id = l.id
ORDER BY l.id;
