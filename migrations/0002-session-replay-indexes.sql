-- Replay support: "newest clear of a session" becomes one probe of a partial index, and
-- databases created by the ikigai C program (idx_messages_session on (session_id, created_at))
-- get the (session_id, id) index replay reads by; their old index is kept under a new name.
-- ikigai-adopt: run
-- depends: 0001-initial-schema

CREATE INDEX IF NOT EXISTS idx_messages_session_clear ON messages (session_id, id)
    WHERE kind = 'clear';

DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_indexes
        WHERE schemaname = current_schema()
          AND indexname = 'idx_messages_session'
          AND indexdef NOT LIKE '%(session_id, id)'
    ) THEN
        ALTER INDEX idx_messages_session RENAME TO idx_messages_session_created;
        CREATE INDEX idx_messages_session ON messages (session_id, id);
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 2 WHERE schema_version < 2;
