-- Undo 0015: 0006's expression index comes back (built CONCURRENTLY), then the stored vectors,
-- their trigger and the new indexes go. Runs outside a transaction like 0015: statement i from
-- the end undoes statement i of 0015, so a 0015 that failed half way is undone by yoyo
-- statement by statement. Idempotent.
UPDATE schema_metadata SET schema_version = 14 WHERE schema_version = 15;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('idx_messages_search') AND NOT indisvalid) THEN
        DROP INDEX idx_messages_search;
    END IF;
END
$$;

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_search ON messages
    USING gin (to_tsvector('english', left(content, 100000)));

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_created;

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_kind;

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_search_vector;

ANALYZE messages;

DROP TRIGGER IF EXISTS messages_search_vector ON messages;

DROP FUNCTION IF EXISTS messages_search_vector();

ALTER TABLE messages DROP COLUMN IF EXISTS search_vector;
