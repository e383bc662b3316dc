-- Citus (issue 36): the same migrations on plain PostgreSQL and on a Citus cluster. This
-- migration defines ikigai_distribute(), which places the tables on the cluster as
-- docs/concepts/citus.md says, and calls it when the citus extension is created in this
-- database; on plain PostgreSQL (and the embedded server) nothing is distributed. A database
-- migrated before citus was created in it is distributed later with `ikigai-store citus
-- distribute` (or SELECT * FROM ikigai_distribute()): its existing rows move to the shards.
--
-- The placement (the reasons are in docs/concepts/citus.md):
-- - messages, the event store's volume, is hash-distributed by session_id: a session's events,
--   and so its agents' (a fork stays in its parent's session), live on one shard, so a
--   session's replay, an agent's replay and the appends are routed to that shard.
--   - Its primary key becomes (session_id, id): Citus requires the distribution column in every
--     unique key. id stays unique, drawn from the coordinator's sequence.
--   - The search-vector trigger (0015), which Citus refuses on a distributed table, becomes a
--     stored generated column with the same expression: every writer still stores the vector
--     its content gives, and none can store another.
--   - Its foreign keys to sessions and agents go: a distributed table may reference only a
--     reference table or a colocated one, and making sessions and agents reference tables
--     would pull every table that references them, transitively all the coordination tables,
--     into Citus' metadata, where Citus restricts their statements. What the keys guaranteed
--     still holds: every append checks, in its one statement and under the same row locks,
--     that the session exists and has not ended and that the agent is a running agent of it;
--     and a session is deleted only once it has no events (queries/portability.sql).
-- - Every other table stays a plain table on the coordinator: the coordination tables keep
--   PostgreSQL's own guarantees (topic offsets, queue claims, lease exclusion), their triggers,
--   and the notifications those fire reach the coordinator's listeners.
-- ikigai_distribute() is idempotent and returns one row per table it changed.
--
-- Also here, for both: the lineage walk of an agent's replay reads messages within the
-- agent's session only, and an append is a function (below).
-- depends: 0028-topic-sequencer

CREATE OR REPLACE FUNCTION ikigai_distribute()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    fk RECORD;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'ikigai_distribute: the citus extension is not created in this database'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    -- One distributor at a time (a second waits, then finds the table placed).
    PERFORM pg_advisory_xact_lock(hashtext('ikigai_distribute'));
    IF EXISTS (SELECT 1 FROM pg_dist_partition
               WHERE logicalrelid = 'messages'::regclass AND partmethod = 'h') THEN
        RETURN;
    END IF;
    FOR fk IN SELECT conname FROM pg_constraint
              WHERE conrelid = 'messages'::regclass AND contype = 'f' LOOP
        EXECUTE format('ALTER TABLE messages DROP CONSTRAINT %I', fk.conname);
    END LOOP;
    DROP TRIGGER IF EXISTS messages_search_vector ON messages;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                   WHERE attrelid = 'messages'::regclass AND attname = 'search_vector'
                     AND attgenerated = 's') THEN
        DROP INDEX IF EXISTS idx_messages_search_vector;
        ALTER TABLE messages DROP COLUMN IF EXISTS search_vector;
        ALTER TABLE messages ADD COLUMN search_vector tsvector
            GENERATED ALWAYS AS (to_tsvector('english', left(content, 100000))) STORED;
        CREATE INDEX idx_messages_search_vector ON messages USING gin (search_vector);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_constraint
               WHERE conrelid = 'messages'::regclass AND conname = 'messages_pkey'
                 AND cardinality(conkey) = 1) THEN
        ALTER TABLE messages DROP CONSTRAINT messages_pkey;
        ALTER TABLE messages ADD CONSTRAINT messages_pkey PRIMARY KEY (session_id, id);
    END IF;
    PERFORM create_distributed_table('messages', 'session_id');
    relation := 'messages';
    made := 'distributed by session_id';
    RETURN NEXT;
END
$fn$;

-- agent_replay_ranges (0005) walks an agent's lineage by uuid alone, reading messages for each
-- agent's newest clear. Every agent of a lineage is in one session (fork_agent puts the child in
-- its parent's session), so those reads are bounded by that session. The walk now reads the
-- agent's session first, then the session's clears (one statement, on Citus routed to the
-- session's shard), then walks agents (a plain table) with them. It terminates as 0005's does:
-- each step follows parent_uuid, which only points at rows created earlier (agents form a
-- forest), or stops at a clear. Same result as 0005's, on plain PostgreSQL and on Citus (where
-- a recursive statement reading shards of several sessions is refused).
CREATE OR REPLACE FUNCTION agent_replay_ranges(leaf_uuid TEXT)
RETURNS TABLE (depth INTEGER, agent_uuid TEXT, start_id BIGINT, end_id BIGINT)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
    clear_agents TEXT[];
    clear_ids BIGINT[];
BEGIN
    SELECT a.session_id INTO sid FROM agents AS a WHERE a.uuid = leaf_uuid;
    IF sid IS NULL THEN
        RETURN;
    END IF;
    SELECT COALESCE(array_agg(m.agent_uuid), '{}'), COALESCE(array_agg(m.id), '{}')
    INTO clear_agents, clear_ids
    FROM messages AS m
    WHERE m.session_id = sid AND m.kind = 'clear' AND m.agent_uuid IS NOT NULL;
    RETURN QUERY
        WITH RECURSIVE walk (depth, uuid, parent_uuid, fork_message_id, end_id, clear_id) AS (
            SELECT 0, a.uuid, a.parent_uuid, a.fork_message_id, CAST(NULL AS bigint),
                   (SELECT max(c.id) FROM unnest(clear_agents, clear_ids) AS c (uuid, id)
                    WHERE c.uuid = a.uuid)
            FROM agents AS a
            WHERE a.uuid = leaf_uuid
            UNION ALL
            SELECT w.depth + 1, p.uuid, p.parent_uuid, p.fork_message_id, w.fork_message_id,
                   (SELECT max(c.id) FROM unnest(clear_agents, clear_ids) AS c (uuid, id)
                    WHERE c.uuid = p.uuid AND c.id <= w.fork_message_id)
            FROM walk AS w
            JOIN agents AS p ON p.uuid = w.parent_uuid
            WHERE w.clear_id IS NULL
        )
        SELECT w.depth, w.uuid, COALESCE(w.clear_id, 0), w.end_id FROM walk AS w;
END
$fn$;

-- Everything lineage replay needs, for one agent, in one call (queries/agents.sql
-- replay_agent_events): each range of agent_replay_ranges() with its events, root range first,
-- id order within; an empty range yields one row of NULLs, so "no rows" means "no such agent".
-- Each range's read names the agent's session: on Citus every read goes to that session's one
-- shard.
CREATE OR REPLACE FUNCTION agent_replay_events(leaf_uuid TEXT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
    r RECORD;
    found_any BOOLEAN;
BEGIN
    SELECT a.session_id INTO sid FROM agents AS a WHERE a.uuid = leaf_uuid;
    IF sid IS NULL THEN
        RETURN;
    END IF;
    FOR r IN SELECT w.agent_uuid, w.start_id, w.end_id
             FROM agent_replay_ranges(leaf_uuid) AS w ORDER BY w.depth DESC LOOP
        found_any := false;
        FOR id, session_id, agent_uuid, kind, content, data, created_at IN
            SELECT e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at
            FROM messages AS e
            WHERE e.session_id = sid
              AND (e.agent_uuid, e.id) > (r.agent_uuid, r.start_id)
              AND (e.agent_uuid, e.id) <= (r.agent_uuid,
                                           COALESCE(r.end_id, 9223372036854775807))
            ORDER BY e.agent_uuid, e.id
        LOOP
            found_any := true;
            RETURN NEXT;
        END LOOP;
        IF NOT found_any THEN
            id := NULL; session_id := NULL; agent_uuid := NULL; kind := NULL;
            content := NULL; data := NULL; created_at := NULL;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$fn$;

-- One append (queries/messages.sql: append_event, append_agent_event, append_message), as a
-- function: the session's row is locked FOR KEY SHARE and checked not ended, the agent's (when
-- given) locked FOR SHARE and checked running in the session, the target (when given) checked
-- to be an event of the session the kind can aim at (a mark for a rewind; anything but a
-- clear or a pop otherwise); then the servers showing the session are woken (pg_notify, on the
-- coordinator on Citus) when its listened_until is in the future, and the event is inserted
-- with the session id as a value. Nothing is returned when a check fails. The locks are held
-- until commit, so a concurrent end_session or kill_agent waits for the append or is seen by
-- it, as with the single statement it replaces. Why a function: on Citus an INSERT ... SELECT
-- that reads coordinator rows is planned through intermediate results (about 8 ms an append on
-- the test cluster); a router INSERT ... VALUES after the checks costs 0.6 ms.
CREATE OR REPLACE FUNCTION ikigai_append(sid BIGINT, agent TEXT, ev_kind TEXT, ev_content TEXT,
                                         ev_data JSONB, target BIGINT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    listened TIMESTAMPTZ;
BEGIN
    SELECT s.listened_until INTO listened
    FROM sessions AS s WHERE s.id = sid AND s.ended_at IS NULL
    FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF agent IS NOT NULL THEN
        PERFORM 1 FROM agents AS a
        WHERE a.uuid = agent AND a.session_id = sid AND a.status = 'running'
        FOR SHARE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF target IS NOT NULL THEN
        PERFORM 1 FROM messages AS m
        WHERE m.session_id = sid AND m.id = target
          AND CASE WHEN ev_kind = 'rewind' THEN m.kind = 'mark'
                   ELSE m.kind NOT IN ('clear', 'pop') END;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF (listened > ikigai_now()) IS TRUE THEN
        PERFORM pg_notify('ikigai_session', CAST(sid AS text));
    END IF;
    RETURN QUERY
        INSERT INTO messages AS e (session_id, agent_uuid, kind, content, data)
        VALUES (sid, agent, ev_kind, ev_content, ev_data)
        RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at;
END
$fn$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM ikigai_distribute();
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 30 WHERE schema_version < 30;
