-- Citus (issue 36): the same migrations on plain PostgreSQL and on a Citus cluster. This
-- migration defines ikigai_distribute(), which places the tables on the cluster as
-- docs/concepts/citus.md says, and calls it when the citus extension is created in this
-- database; on plain PostgreSQL (and the embedded server) it only defines the function, and
-- nothing else changes. A database migrated before citus was created is distributed later with
-- `ikigai-store citus distribute` (or SELECT * FROM ikigai_distribute()): existing rows move to
-- the shards.
--
-- The placement (the design's reasons are in docs/concepts/citus.md):
-- - messages, the event store's volume, is hash-distributed by session_id: a session's events
--   (and its agents' forks, which stay in their parent's session) live on one shard, so a
--   replay, replay_agent and a session's search are router queries. Its primary key becomes
--   (session_id, id) (Citus requires the distribution column in every unique key; id stays
--   unique, drawn from the coordinator's sequence). The search-vector trigger (refused on
--   distributed tables) becomes a stored generated column with the same expression, so every
--   writer still stores the vector its content gives.
-- - sessions and agents, the lineage every event query checks and locks, are reference tables
--   (a copy on every node: the lineage walk and the FOR KEY SHARE/FOR SHARE of an append run on
--   the event's shard; the foreign keys from messages stay).
-- - every other table stays on the coordinator (Citus makes those with a foreign key to a
--   reference table "citus local" tables): the coordination tables keep PostgreSQL's own
--   guarantees there (topic offsets, queue claims, lease exclusion, their triggers and the
--   notifications those fire reach the coordinator's listeners).
-- ikigai_distribute() is idempotent (a table already placed is left alone) and returns one row
-- per table it changed.
-- depends: 0027-runtime-stores

CREATE OR REPLACE FUNCTION ikigai_distribute()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    placed BOOLEAN;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'ikigai_distribute: the citus extension is not created in this database'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    -- One distributor at a time (a second waits, then finds the tables placed).
    PERFORM pg_advisory_xact_lock(hashtext('ikigai_distribute'));
    -- Moving a table's rows executes on the coordinator's own placements; the sessions of the
    -- application do not (below).
    PERFORM set_config('citus.enable_local_execution', 'on', true);
    -- The coordinator holds a copy of every reference table and the tables left on it. Citus
    -- reads and writes those in the backend itself ("local execution") unless told not to, and
    -- then refuses, in the same transaction, a later statement that needs a connection to them
    -- too ("cannot switch local execution status"): e.g. creating an agent (a reference table
    -- row), then searching across sessions. So the application's sessions reach them through a
    -- connection like any placement.
    EXECUTE format('ALTER DATABASE %I SET citus.enable_local_execution = off',
                   current_database());
    -- A statement that reads every shard (search across sessions, a fork point) uses one
    -- connection per node, not one per shard: a transaction may then still write a reference
    -- table (Citus refuses that after a parallel read, whose connections each saw a part).
    EXECUTE format('ALTER DATABASE %I SET citus.multi_shard_modify_mode = sequential',
                   current_database());

    FOREACH relation IN ARRAY ARRAY['sessions', 'agents'] LOOP
        -- (A "citus local" table, which Citus makes of a table with a foreign key to a
        -- reference table, has partmethod 'n' too: a reference table is replicated, 't'.)
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1::regclass'
                || ' AND partmethod = ''n'' AND repmodel = ''t'')'
            INTO placed USING relation;
        IF NOT placed THEN
            PERFORM create_reference_table(relation);
            made := 'reference';
            RETURN NEXT;
        END IF;
    END LOOP;

    relation := 'messages';
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1::regclass'
            || ' AND partmethod = ''h'')'
        INTO placed USING relation;
    IF NOT placed THEN
        -- The trigger becomes a generated column with the same expression (a table rewrite).
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
                     AND conkey = ARRAY[(SELECT attnum FROM pg_attribute
                                         WHERE attrelid = 'messages'::regclass
                                           AND attname = 'id')]) THEN
            ALTER TABLE messages DROP CONSTRAINT messages_pkey;
            ALTER TABLE messages ADD CONSTRAINT messages_pkey PRIMARY KEY (session_id, id);
        END IF;
        PERFORM create_distributed_table('messages', 'session_id');
        made := 'distributed by session_id';
        RETURN NEXT;
    END IF;
END
$fn$;

-- agent_replay_ranges (migration 0005) walks an agent's lineage by uuid alone. Every agent of a
-- lineage is in one session (fork_agent puts the child in its parent's session), so the walk
-- and its reads of messages are bounded by that session. Both functions below read the
-- agent's session first (agents is a reference table on Citus: a copy on every node), then run
-- one statement whose every read of messages names that session: on Citus that statement goes
-- to the one shard holding the session (a recursive query that is not on one shard is refused
-- there); on plain PostgreSQL it is the same walk with one more index column known. (The walk
-- is written in each function: Citus refuses a SQL function over a distributed table called
-- with a parameter, so one cannot call the other.) The walk terminates as 0005's does: each
-- step follows parent_uuid, which only points at rows created earlier (agents form a forest),
-- or stops at a clear.
CREATE OR REPLACE FUNCTION agent_replay_ranges(leaf_uuid TEXT)
RETURNS TABLE (depth INTEGER, agent_uuid TEXT, start_id BIGINT, end_id BIGINT)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
BEGIN
    SELECT a.session_id INTO sid FROM agents AS a WHERE a.uuid = leaf_uuid;
    IF sid IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        WITH RECURSIVE walk (depth, uuid, parent_uuid, fork_message_id, end_id, clear_id) AS (
            SELECT 0, a.uuid, a.parent_uuid, a.fork_message_id, CAST(NULL AS bigint),
                   (SELECT max(m.id) FROM messages AS m
                    WHERE m.session_id = sid AND m.agent_uuid = a.uuid AND m.kind = 'clear')
            FROM agents AS a
            WHERE a.uuid = leaf_uuid AND a.session_id = sid
            UNION ALL
            SELECT w.depth + 1, p.uuid, p.parent_uuid, p.fork_message_id, w.fork_message_id,
                   (SELECT max(m.id) FROM messages AS m
                    WHERE m.session_id = sid AND m.agent_uuid = p.uuid AND m.kind = 'clear'
                      AND m.id <= w.fork_message_id)
            FROM walk AS w
            JOIN agents AS p ON p.uuid = w.parent_uuid AND p.session_id = sid
            WHERE w.clear_id IS NULL
        ),
        ranges AS (
            SELECT w.depth, w.uuid AS agent_uuid, COALESCE(w.clear_id, 0) AS start_id, w.end_id
            FROM walk AS w
        )
        SELECT r.depth, r.agent_uuid, r.start_id, r.end_id FROM ranges AS r;
END
$fn$;

-- Everything lineage replay needs, for one agent, in one call (queries/agents.sql
-- replay_agent_events): each range's events, root range first, id order within; an empty
-- range yields one row of NULLs, so "no rows" means "no such agent".
CREATE OR REPLACE FUNCTION agent_replay_events(leaf_uuid TEXT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
BEGIN
    SELECT a.session_id INTO sid FROM agents AS a WHERE a.uuid = leaf_uuid;
    IF sid IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        WITH RECURSIVE walk (depth, uuid, parent_uuid, fork_message_id, end_id, clear_id) AS (
            SELECT 0, a.uuid, a.parent_uuid, a.fork_message_id, CAST(NULL AS bigint),
                   (SELECT max(m.id) FROM messages AS m
                    WHERE m.session_id = sid AND m.agent_uuid = a.uuid AND m.kind = 'clear')
            FROM agents AS a
            WHERE a.uuid = leaf_uuid AND a.session_id = sid
            UNION ALL
            SELECT w.depth + 1, p.uuid, p.parent_uuid, p.fork_message_id, w.fork_message_id,
                   (SELECT max(m.id) FROM messages AS m
                    WHERE m.session_id = sid AND m.agent_uuid = p.uuid AND m.kind = 'clear'
                      AND m.id <= w.fork_message_id)
            FROM walk AS w
            JOIN agents AS p ON p.uuid = w.parent_uuid AND p.session_id = sid
            WHERE w.clear_id IS NULL
        ),
        ranges AS (
            SELECT w.depth, w.uuid AS agent_uuid, COALESCE(w.clear_id, 0) AS start_id, w.end_id
            FROM walk AS w
        )
        SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, m.data, m.created_at
        FROM ranges AS r
        LEFT JOIN LATERAL (
            SELECT e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at
            FROM messages AS e
            WHERE e.session_id = sid
              AND (e.agent_uuid, e.id) > (r.agent_uuid, r.start_id)
              AND (e.agent_uuid, e.id) <= (r.agent_uuid, COALESCE(r.end_id, 9223372036854775807))
        ) AS m ON true
        ORDER BY r.depth DESC, m.id;
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
