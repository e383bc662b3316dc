-- Undo 0030: on Citus, messages goes back to the coordinator (its rows with it); on both,
-- messages gets back its primary key (id), its foreign keys and its search-vector trigger (the
-- generated column becomes a plain column the trigger keeps), and 0005's lineage walk returns.
-- On Citus, this transaction both moves a table and replaces functions (which Citus propagates
-- to the workers over one connection per node): its shard commands run one at a time (without
-- this, the first function replaced after undistribute_table is refused).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
END
$$;

DO $$
DECLARE
    distributed BOOLEAN;
BEGIN
    -- (pg_dist_partition exists only with citus: read it through EXECUTE.)
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition'
                || ' WHERE logicalrelid = ''messages''::regclass)' INTO distributed;
        IF distributed THEN
            EXECUTE 'SELECT undistribute_table(''messages'')';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = 'messages'::regclass AND attname = 'search_vector'
                 AND attgenerated = 's') THEN
        ALTER TABLE messages ALTER COLUMN search_vector DROP EXPRESSION;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgrelid = 'messages'::regclass AND tgname = 'messages_search_vector') THEN
        CREATE TRIGGER messages_search_vector
            BEFORE INSERT OR UPDATE OF content, search_vector ON messages
            FOR EACH ROW EXECUTE FUNCTION messages_search_vector();
    END IF;
    IF EXISTS (SELECT 1 FROM pg_constraint
               WHERE conrelid = 'messages'::regclass AND conname = 'messages_pkey'
                 AND cardinality(conkey) = 2) THEN
        ALTER TABLE messages DROP CONSTRAINT messages_pkey;
        ALTER TABLE messages ADD CONSTRAINT messages_pkey PRIMARY KEY (id);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'messages'::regclass AND conname = 'messages_session_id_fkey') THEN
        ALTER TABLE messages ADD CONSTRAINT messages_session_id_fkey
            FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'messages'::regclass AND conname = 'messages_agent_uuid_fkey') THEN
        ALTER TABLE messages ADD CONSTRAINT messages_agent_uuid_fkey
            FOREIGN KEY (agent_uuid) REFERENCES agents (uuid);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'messages'::regclass
                     AND conname = 'messages_agent_session_fkey') THEN
        ALTER TABLE messages ADD CONSTRAINT messages_agent_session_fkey
            FOREIGN KEY (agent_uuid, session_id) REFERENCES agents (uuid, session_id);
    END IF;
END
$$;

DROP FUNCTION IF EXISTS ikigai_append(BIGINT, TEXT, TEXT, TEXT, JSONB, BIGINT);
DROP FUNCTION IF EXISTS agent_replay_events(TEXT);
DROP FUNCTION IF EXISTS agent_replay_ranges(TEXT);
-- 0005's walk, as it was.
CREATE OR REPLACE FUNCTION agent_replay_ranges(leaf_uuid TEXT)
RETURNS TABLE (depth INTEGER, agent_uuid TEXT, start_id BIGINT, end_id BIGINT)
LANGUAGE sql STABLE
AS $fn$
    WITH RECURSIVE walk (depth, uuid, parent_uuid, fork_message_id, end_id, clear_id) AS (
        SELECT 0, a.uuid, a.parent_uuid, a.fork_message_id, CAST(NULL AS bigint),
               (SELECT max(m.id) FROM messages AS m
                WHERE m.agent_uuid = a.uuid AND m.kind = 'clear')
        FROM agents AS a
        WHERE a.uuid = leaf_uuid
        UNION ALL
        SELECT w.depth + 1, p.uuid, p.parent_uuid, p.fork_message_id, w.fork_message_id,
               (SELECT max(m.id) FROM messages AS m
                WHERE m.agent_uuid = p.uuid AND m.kind = 'clear' AND m.id <= w.fork_message_id)
        FROM walk AS w
        JOIN agents AS p ON p.uuid = w.parent_uuid
        WHERE w.clear_id IS NULL
    )
    SELECT depth, uuid, COALESCE(clear_id, 0), end_id FROM walk
$fn$;
DROP FUNCTION IF EXISTS ikigai_distribute();
UPDATE schema_metadata SET schema_version = 28 WHERE schema_version = 30;
