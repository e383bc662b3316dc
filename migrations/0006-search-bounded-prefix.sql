-- Full-text search indexes a bounded prefix of each event's content: the first 100,000
-- characters. A tsvector holds at most 1 MB, so indexing whole contents made appends of large
-- texts (a 4 MB tool log of distinct words) fail; 100,000 characters of the worst case (distinct
-- 2-4 character words) make about 300 kB. Queries must use the exact expression
-- to_tsvector('english', left(content, 100000)) for the index to apply (queries/search.sql).
-- Builds the index in this migration's transaction: writes to messages wait meanwhile.
-- Idempotent; also converts the index of an adopted C-era database.
-- ikigai-adopt: run
-- depends: 0005-lineage-walk-and-kinds

DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_indexes
        WHERE schemaname = current_schema() AND indexname = 'idx_messages_search'
          AND indexdef LIKE '%left"(content, 100000)%'
    ) THEN
        DROP INDEX IF EXISTS idx_messages_search;
        CREATE INDEX idx_messages_search ON messages
            USING gin (to_tsvector('english', left(content, 100000)));
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 6 WHERE schema_version < 6;
