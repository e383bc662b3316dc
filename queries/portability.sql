-- Sessions out of and into a database, and their retention (ikigai_store/portability.py).
-- An export (format version 2) is a header (written by Python), then the session's line and
-- its agents' lines (JSON), the events line (Python), its events in COPY's own text format,
-- made here (up to a horizon taken once the appends in flight are in: the agents and the
-- events agree even while the session is written to), then a trailer (Python: the line count
-- and a SHA-256 of everything before it). The JSON lines go through COPY ... (FORMAT csv)
-- with a delimiter and a quote that JSON text never holds raw (\x02, \x01: JSON escapes
-- control characters), which passes each line through verbatim, unlike the text format,
-- which would double every backslash. An import streams the JSON lines back through the same
-- kind of COPY into a temporary table and the event lines through COPY's text format into a
-- typed one (a version 1 file's events, JSON lines, are moved there once checked), checks
-- them, and inserts the session, its agents and its events under new ids, all in one
-- transaction.

-- name: export_head(session_id)^
-- The session's line and the export's horizon: its newest event id (0: none).
SELECT CAST(json_build_object('type', 'session', 'id', s.id, 'title', s.title,
                              'started_at', s.started_at, 'ended_at', s.ended_at) AS text)
           AS line,
       coalesce((SELECT max(m.id) FROM messages AS m WHERE m.session_id = :session_id), 0)
           AS horizon
FROM sessions AS s WHERE s.id = :session_id;

-- name: export_agents(session_id, horizon)
-- The session's agents forked at or before the horizon (a later one has nothing exported),
-- oldest first (parents before children), as JSON lines passed through verbatim.
COPY (
    SELECT CAST(row_to_json(line) AS text)
    FROM (SELECT 'agent' AS type, a.uuid, a.name, a.parent_uuid, a.fork_message_id, a.status,
                 a.created_at, a.ended_at, a.provider, a.model, a.thinking_level, a.idle
          FROM agents AS a
          WHERE a.session_id = :session_id AND a.fork_message_id <= :horizon
          ORDER BY a.id) AS line
) TO STDOUT (FORMAT csv, DELIMITER E'\x02', QUOTE E'\x01');

-- name: export_settings()^
-- The export's COPYs write times as ISO 8601 in UTC, whatever the connection's settings
-- (DateStyle, TimeZone: set for the transaction); returns the settings they replace
-- (export_restore puts them back, for a caller's transaction that goes on).
SELECT s.datestyle, s.timezone,
       set_config('DateStyle', 'ISO, YMD', true) AS iso,
       set_config('TimeZone', 'UTC', true) AS utc
FROM (SELECT current_setting('DateStyle') AS datestyle, current_setting('TimeZone') AS timezone
      OFFSET 0) AS s;

-- name: export_restore(datestyle, timezone)^
-- Put back the settings export_settings replaced.
SELECT set_config('DateStyle', :datestyle, true) AS datestyle,
       set_config('TimeZone', :timezone, true) AS timezone;

-- name: export_events(session_id, horizon)
-- The session's events up to the horizon in id order (the index on messages (session_id,
-- id): no sort), in COPY's text format: the columns the events line names, as stored,
-- converted by their output functions, nothing computed per row (version 1 made a JSON
-- object per event with to_json and ||, which cost the server about twice this: issue 38).
-- Run after export_settings (ISO times in UTC).
COPY (
    SELECT m.id, m.agent_uuid, m.kind, m.content, m.data, m.created_at
    FROM messages AS m
    WHERE m.session_id = :session_id AND m.id <= :horizon
    ORDER BY m.id
) TO STDOUT;

-- name: import_stage()!
-- The import's staging tables: the file's JSON lines between header and trailer (a version
-- 1 file's events among them) and its events, in file order (dropped at commit;
-- import_unstage drops them earlier, so two imports can share a transaction).
CREATE TEMPORARY TABLE ikigai_import_lines (
    ord BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    line JSONB NOT NULL
) ON COMMIT DROP;

-- name: import_stage_events()!
-- The import's typed staging table of events (see import_stage).
CREATE TEMPORARY TABLE ikigai_import_events (
    ord BIGINT GENERATED ALWAYS AS IDENTITY,
    id BIGINT,
    agent_uuid TEXT,
    kind TEXT,
    content TEXT,
    data JSONB,
    created_at TIMESTAMPTZ
) ON COMMIT DROP;

-- name: import_copy_lines()!
-- Fed the JSON lines by the caller (psycopg's copy.write), verbatim (see the file's header).
COPY ikigai_import_lines (line) FROM STDIN (FORMAT csv, DELIMITER E'\x02', QUOTE E'\x01');

-- name: import_copy_events()!
-- Fed a version 2 file's event lines by the caller: COPY's text format, the columns its
-- events line names (checked by the caller), typed here (a bad time or id is an error).
COPY ikigai_import_events (id, agent_uuid, kind, content, data, created_at) FROM STDIN;

-- name: import_check()^
-- What is wrong with the staged lines (problem NULL: nothing), and their counts. The shape:
-- a session line first, then agent lines, then event lines; every field of the right JSON
-- type; event ids increasing; every agent (of an event or as a parent) and every fork point
-- among the file's own. Timestamps and kinds are checked by the inserts themselves.
WITH typed AS (
    SELECT ord, line, line ->> 'type' AS type FROM ikigai_import_lines
), counts AS (
    SELECT count(*) FILTER (WHERE type = 'session') AS sessions,
           count(*) FILTER (WHERE type = 'agent') AS agents,
           count(*) FILTER (WHERE type = 'event') AS events,
           count(*) FILTER (WHERE type IS NULL OR type NOT IN ('session', 'agent', 'event'))
               AS unknown,
           max(ord) FILTER (WHERE type = 'agent') AS last_agent,
           min(ord) FILTER (WHERE type = 'event') AS first_event
    FROM typed
), events AS (
    SELECT ord, line,
           lag(CAST(line ->> 'id' AS numeric)) OVER (ORDER BY ord) AS previous_id
    FROM typed WHERE type = 'event'
), agent_uuids AS (
    SELECT line ->> 'uuid' AS uuid FROM typed WHERE type = 'agent'
)
SELECT c.sessions, c.agents, c.events,
       CASE
         WHEN c.sessions <> 1 OR (SELECT type FROM typed WHERE ord = 1) <> 'session'
           THEN 'the file does not begin with one session line'
         WHEN c.unknown > 0 THEN 'the file has lines of an unknown type'
         WHEN c.last_agent > c.first_event THEN 'an agent line comes after an event line'
         WHEN EXISTS (SELECT 1 FROM typed WHERE type = 'agent'
                      AND (jsonb_typeof(line -> 'uuid') IS DISTINCT FROM 'string'
                           OR jsonb_typeof(line -> 'fork_message_id')
                                IS DISTINCT FROM 'number'
                           OR jsonb_typeof(line -> 'status') IS DISTINCT FROM 'string'
                           OR jsonb_typeof(line -> 'idle') IS DISTINCT FROM 'boolean'))
           THEN 'an agent line lacks its uuid, fork_message_id, status or idle'
         WHEN (SELECT count(*) FROM agent_uuids) <> (SELECT count(DISTINCT uuid) FROM agent_uuids)
           THEN 'two agent lines have the same uuid'
         WHEN EXISTS (SELECT 1 FROM typed WHERE type = 'agent'
                      AND jsonb_typeof(line -> 'parent_uuid') = 'string'
                      AND line ->> 'parent_uuid' NOT IN (SELECT uuid FROM agent_uuids))
           THEN 'an agent''s parent is not in the file'
         WHEN EXISTS (SELECT 1 FROM events
                      WHERE jsonb_typeof(line -> 'id') IS DISTINCT FROM 'number'
                         OR jsonb_typeof(line -> 'kind') IS DISTINCT FROM 'string'
                         OR jsonb_typeof(line -> 'created_at') IS DISTINCT FROM 'string'
                         OR CAST(line ->> 'id' AS numeric) <= previous_id)
           THEN 'an event line lacks its id, kind or time, or its id is not above the last'
         WHEN EXISTS (SELECT 1 FROM events
                      WHERE jsonb_typeof(line -> 'agent_uuid') = 'string'
                        AND line ->> 'agent_uuid' NOT IN (SELECT uuid FROM agent_uuids))
           THEN 'an event''s agent is not in the file'
         WHEN EXISTS (SELECT 1 FROM typed AS a WHERE a.type = 'agent'
                      AND CAST(a.line ->> 'fork_message_id' AS numeric) > 0
                      AND NOT EXISTS (SELECT 1 FROM events AS e
                                      WHERE e.line -> 'id' = a.line -> 'fork_message_id'))
           THEN 'an agent''s fork point is not an event of the file'
       END AS problem
FROM counts AS c;

-- name: import_check_events()^
-- import_check for a version 2 file: its JSON lines are the session's and the agents' (the
-- same checks), its events are typed rows of ikigai_import_events: every one with an id, a
-- kind and a time, ids increasing, agents and fork points among the file's own.
WITH typed AS (
    SELECT ord, line, line ->> 'type' AS type FROM ikigai_import_lines
), counts AS (
    SELECT count(*) FILTER (WHERE type = 'session') AS sessions,
           count(*) FILTER (WHERE type = 'agent') AS agents,
           count(*) FILTER (WHERE type IS NULL OR type NOT IN ('session', 'agent')) AS unknown
    FROM typed
), events AS (
    SELECT id, agent_uuid, kind, created_at, lag(id) OVER (ORDER BY ord) AS previous_id
    FROM ikigai_import_events
), agent_uuids AS (
    SELECT line ->> 'uuid' AS uuid FROM typed WHERE type = 'agent'
)
SELECT c.sessions, c.agents, (SELECT count(*) FROM ikigai_import_events) AS events,
       CASE
         WHEN c.sessions <> 1 OR (SELECT type FROM typed WHERE ord = 1) <> 'session'
           THEN 'the file does not begin with one session line'
         WHEN c.unknown > 0 THEN 'the file has lines of an unknown type before its events'
         WHEN EXISTS (SELECT 1 FROM typed WHERE type = 'agent'
                      AND (jsonb_typeof(line -> 'uuid') IS DISTINCT FROM 'string'
                           OR jsonb_typeof(line -> 'fork_message_id')
                                IS DISTINCT FROM 'number'
                           OR jsonb_typeof(line -> 'status') IS DISTINCT FROM 'string'
                           OR jsonb_typeof(line -> 'idle') IS DISTINCT FROM 'boolean'))
           THEN 'an agent line lacks its uuid, fork_message_id, status or idle'
         WHEN (SELECT count(*) FROM agent_uuids) <> (SELECT count(DISTINCT uuid) FROM agent_uuids)
           THEN 'two agent lines have the same uuid'
         WHEN EXISTS (SELECT 1 FROM typed WHERE type = 'agent'
                      AND jsonb_typeof(line -> 'parent_uuid') = 'string'
                      AND line ->> 'parent_uuid' NOT IN (SELECT uuid FROM agent_uuids))
           THEN 'an agent''s parent is not in the file'
         WHEN EXISTS (SELECT 1 FROM events
                      WHERE id IS NULL OR kind IS NULL OR created_at IS NULL
                         OR id <= previous_id)
           THEN 'an event line lacks its id, kind or time, or its id is not above the last'
         WHEN EXISTS (SELECT 1 FROM events
                      WHERE agent_uuid IS NOT NULL
                        AND agent_uuid NOT IN (SELECT uuid FROM agent_uuids))
           THEN 'an event''s agent is not in the file'
         WHEN EXISTS (SELECT 1 FROM typed AS a WHERE a.type = 'agent'
                      AND CAST(a.line ->> 'fork_message_id' AS numeric) > 0
                      AND NOT EXISTS (SELECT 1 FROM ikigai_import_events AS e
                                      WHERE e.id = CAST(a.line ->> 'fork_message_id'
                                                        AS numeric)))
           THEN 'an agent''s fork point is not an event of the file'
       END AS problem
FROM counts AS c;

-- name: import_v1_events()!
-- A version 1 file's event lines (JSON, checked by import_check) as typed rows of
-- ikigai_import_events, in file order (a volatile identity is drawn after ORDER BY): from
-- here on, both versions import alike. An id or a time of the wrong form is an error.
INSERT INTO ikigai_import_events (id, agent_uuid, kind, content, data, created_at)
SELECT CAST(line ->> 'id' AS bigint), line ->> 'agent_uuid', line ->> 'kind',
       line ->> 'content', line -> 'data', CAST(line ->> 'created_at' AS timestamptz)
FROM ikigai_import_lines
WHERE line ->> 'type' = 'event'
ORDER BY ord;

-- name: import_session_row()^
-- The imported session under a new id, as it was (title, times).
INSERT INTO sessions (title, started_at, ended_at)
SELECT line ->> 'title', CAST(line ->> 'started_at' AS timestamptz),
       CAST(line ->> 'ended_at' AS timestamptz)
FROM ikigai_import_lines WHERE ord = 1
RETURNING id;

-- name: import_ids()!
-- New ids for the events, taken from messages' sequence in the file's order (a volatile
-- target list is evaluated after ORDER BY), so the imported events keep their order; other
-- sessions' appends meanwhile only make gaps.
CREATE TEMPORARY TABLE ikigai_import_ids ON COMMIT DROP AS
SELECT id AS old_id, nextval('messages_id_seq') AS new_id
FROM ikigai_import_events
ORDER BY ord;

-- name: import_old_agents()
-- The file's agent uuids, in file order (the caller draws their new uuids).
SELECT line ->> 'uuid' AS uuid FROM ikigai_import_lines
WHERE line ->> 'type' = 'agent'
ORDER BY ord;

-- name: import_agents(session_id, old_uuids, new_uuids)!
-- The agents under their new uuids (:old_uuids[i] becomes :new_uuids[i]), parents and fork
-- points mapped, in file order (oldest first).
WITH uuids AS (
    SELECT * FROM unnest(CAST(:old_uuids AS text[]), CAST(:new_uuids AS text[]))
        AS u (old_uuid, new_uuid)
)
INSERT INTO agents (uuid, session_id, name, parent_uuid, fork_message_id, status, created_at,
                    ended_at, provider, model, thinking_level, idle)
SELECT u.new_uuid, :session_id, l.line ->> 'name', p.new_uuid,
       coalesce(i.new_id, 0), l.line ->> 'status',
       CAST(l.line ->> 'created_at' AS timestamptz), CAST(l.line ->> 'ended_at' AS timestamptz),
       l.line ->> 'provider', l.line ->> 'model', l.line ->> 'thinking_level',
       CAST(l.line ->> 'idle' AS boolean)
FROM ikigai_import_lines AS l
JOIN uuids AS u ON u.old_uuid = l.line ->> 'uuid'
LEFT JOIN uuids AS p ON p.old_uuid = l.line ->> 'parent_uuid'
LEFT JOIN ikigai_import_ids AS i ON i.old_id = CAST(l.line ->> 'fork_message_id' AS bigint)
WHERE l.line ->> 'type' = 'agent'
ORDER BY l.ord;

-- name: import_events(session_id, old_uuids, new_uuids)!
-- The staged events under their new ids and agents; a target_message_id in data (a rewind's,
-- or any event's that names an event of the file) is mapped to the new id.
WITH uuids AS (
    SELECT * FROM unnest(CAST(:old_uuids AS text[]), CAST(:new_uuids AS text[]))
        AS u (old_uuid, new_uuid)
)
INSERT INTO messages (id, session_id, agent_uuid, kind, content, data, created_at)
SELECT i.new_id, :session_id, u.new_uuid, e.kind, e.content,
       CASE WHEN t.new_id IS NOT NULL
            THEN jsonb_set(e.data, '{target_message_id}', to_jsonb(t.new_id))
            ELSE nullif(e.data, 'null') END,
       e.created_at
FROM ikigai_import_events AS e
JOIN ikigai_import_ids AS i ON i.old_id = e.id
LEFT JOIN uuids AS u ON u.old_uuid = e.agent_uuid
LEFT JOIN ikigai_import_ids AS t
       ON jsonb_typeof(e.data -> 'target_message_id') = 'number'
      AND t.old_id = CAST(e.data ->> 'target_message_id' AS numeric)
ORDER BY i.new_id;

-- name: import_unstage()!
-- Drop the import's temporary tables (before commit: a second import in the same
-- transaction makes its own).
DROP TABLE IF EXISTS ikigai_import_lines, ikigai_import_events, ikigai_import_ids;

-- name: import_find(export_id)^
-- The session an earlier --once import of this file made (none: never imported).
SELECT session_id FROM session_imports WHERE export_id = :export_id;

-- name: import_record(export_id, session_id)!
-- Remember that the file :export_id was imported as :session_id (--once).
INSERT INTO session_imports (export_id, session_id) VALUES (:export_id, :session_id);

-- name: prune_sessions_due(ended_before, after, lim)
-- Up to :lim sessions with an id above :after that ended before :ended_before, by id (never
-- an active one: ended_at is set once, by end_session, and appends refuse an ended session).
SELECT id FROM sessions
WHERE ended_at IS NOT NULL AND ended_at < :ended_before AND id > :after
ORDER BY id
LIMIT :lim;

-- name: prune_sessions_count(ended_before)^
-- What prune_sessions would delete: the sessions, their events and their agents.
-- The ended sessions are read first (a CTE), then their events and agents counted: on Citus a
-- subquery of a distributed table correlated with a coordinator table is refused.
WITH ended AS (
    SELECT s.id FROM sessions AS s
    WHERE s.ended_at IS NOT NULL AND s.ended_at < :ended_before
)
SELECT (SELECT count(*) FROM ended) AS sessions,
       (SELECT count(*) FROM messages AS m WHERE m.session_id IN (SELECT id FROM ended))
           AS events,
       (SELECT count(*) FROM agents AS a WHERE a.session_id IN (SELECT id FROM ended))
           AS agents;

-- name: prune_session_events(session_id, lim)!
-- Delete up to :lim of an ended session's events, newest first (one short transaction per
-- batch: no long lock). Returns the rows deleted.
-- The session is checked ended in a CTE and every read of messages names it, so on Citus the
-- delete goes to the session's one shard.
WITH ended AS (
    SELECT s.id FROM sessions AS s WHERE s.id = :session_id AND s.ended_at IS NOT NULL
)
DELETE FROM messages
WHERE session_id = :session_id
  AND id IN (SELECT m.id FROM messages AS m
             WHERE m.session_id = :session_id AND m.session_id IN (SELECT id FROM ended)
             ORDER BY m.id DESC
             LIMIT :lim);

-- name: prune_session_row(session_id)^
-- Delete an ended session whose events are gone, with what cascades from it: its agents
-- (and their context summaries), listeners, import record, LangGraph thread. sessions: 1 when
-- it went (0: not an ended session, or it has events again); agents: how many it had.
-- Whether it has events is read first (a CTE; Citus refuses a delete of a coordinator table
-- whose condition reads a distributed one). An ended session gets no new events, so the answer
-- cannot go stale before the delete. A LangGraph thread's checkpoint rows go with it by
-- langgraph_delete_rows (migration 0033): on Citus they have no foreign key to cascade on.
WITH has_events AS (
    SELECT EXISTS (SELECT 1 FROM messages AS m WHERE m.session_id = :session_id) AS yes
),
gone AS (
    DELETE FROM sessions AS s
    WHERE s.id = :session_id AND s.ended_at IS NOT NULL
      AND NOT (SELECT yes FROM has_events)
    RETURNING s.id
),
checkpoint_rows AS (
    SELECT langgraph_delete_rows(g.id) AS n FROM gone AS g
)
SELECT count(*) AS sessions,
       (SELECT count(*) FROM agents AS a WHERE a.session_id = :session_id) AS agents,
       (SELECT count(*) FROM checkpoint_rows) AS threads
FROM gone;
