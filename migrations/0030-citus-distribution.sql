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

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM ikigai_distribute();
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 30 WHERE schema_version < 30;
