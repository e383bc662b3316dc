-- Undo 0030: on Citus, the tables go back to the coordinator (their rows with them), messages
-- gets back its primary key (id) and its search-vector trigger (the generated column becomes a
-- plain column the trigger keeps); then ikigai_distribute() goes. On plain PostgreSQL only the
-- function goes.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'messages'::regclass) THEN
            PERFORM undistribute_table('messages');
        END IF;
        IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'agents'::regclass) THEN
            PERFORM undistribute_table('agents', cascade_via_foreign_keys => true);
        END IF;
        IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) THEN
            PERFORM undistribute_table('sessions', cascade_via_foreign_keys => true);
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = 'messages'::regclass AND attname = 'search_vector'
                 AND attgenerated = 's') THEN
        ALTER TABLE messages ALTER COLUMN search_vector DROP EXPRESSION;
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
END
$$;

DROP FUNCTION IF EXISTS agent_replay_events(TEXT);
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
UPDATE schema_metadata SET schema_version = 27 WHERE schema_version = 30;
