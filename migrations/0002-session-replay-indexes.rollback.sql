-- Undo 0002: drop the clear index and give a C-era database its original session index back.
DROP INDEX IF EXISTS idx_messages_session_clear;

DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_indexes
        WHERE schemaname = current_schema() AND indexname = 'idx_messages_session_created'
    ) THEN
        DROP INDEX IF EXISTS idx_messages_session;
        ALTER INDEX idx_messages_session_created RENAME TO idx_messages_session;
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 1 WHERE schema_version = 2;
