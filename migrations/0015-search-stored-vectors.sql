-- Search with stored vectors (issue 11): messages.search_vector holds
-- to_tsvector('english', left(content, 100000)) (NULL for a NULL content), kept by the trigger
-- messages_search_vector on every insert and on every update of content or search_vector
-- (so no writer can store a vector that disagrees with its content), under the GIN index
-- idx_messages_search_vector. It replaces 0006's expression index idx_messages_search: search no
-- longer re-parses a content to rank it. idx_messages_kind (kind, id) and idx_messages_created
-- (created_at, id) let the kinds and time filters of search drive bitmap index scans.
-- Runs outside a transaction (transactional: false) so that a big table stays writable: adding
-- the nullable column is a catalog change; existing rows are filled in batches of 10,000, each
-- committed on its own (appends never wait for more than one batch's row locks; new rows get
-- their vector from the trigger meanwhile); indexes are built CONCURRENTLY, then the old index
-- is dropped CONCURRENTLY; searches keep working throughout. Measured with
-- scripts/bench_search.py (2 cores): about 3 minutes per million messages, mostly the batched
-- fill (each rewritten row is parsed again for the old index until it goes). CONCURRENTLY waits
-- for the transactions open when it starts: a long open transaction delays this migration.
-- Every statement is idempotent: if the migration stops half way (an error, a killed
-- migrator), applying it again resumes (an index left invalid by an interrupted CONCURRENTLY
-- build is dropped and built again). Rollback restores idx_messages_search.
-- transactional: false
-- depends: 0014-leases

ALTER TABLE messages ADD COLUMN IF NOT EXISTS search_vector tsvector;

CREATE OR REPLACE FUNCTION messages_search_vector() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    NEW.search_vector := to_tsvector('english', left(NEW.content, 100000));
    RETURN NEW;
END
$fn$;

DO $$
BEGIN
    DROP TRIGGER IF EXISTS messages_search_vector ON messages;
    CREATE TRIGGER messages_search_vector
        BEFORE INSERT OR UPDATE OF content, search_vector ON messages
        FOR EACH ROW EXECUTE FUNCTION messages_search_vector();
END
$$;

-- Fill the rows written before the trigger, 10,000 ids per committed batch (the trigger
-- computes each vector), then drop what an interrupted CONCURRENTLY build left invalid.
DO $$
DECLARE
    next_id BIGINT;
    last_id BIGINT;
BEGIN
    SELECT min(id), max(id) INTO next_id, last_id FROM messages;
    WHILE next_id <= last_id LOOP
        UPDATE messages SET search_vector = NULL
        WHERE id >= next_id AND id < next_id + 10000
          AND search_vector IS NULL AND content IS NOT NULL;
        COMMIT;
        next_id := next_id + 10000;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('idx_messages_search_vector') AND NOT indisvalid) THEN
        DROP INDEX idx_messages_search_vector;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('idx_messages_kind') AND NOT indisvalid) THEN
        DROP INDEX idx_messages_kind;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('idx_messages_created') AND NOT indisvalid) THEN
        DROP INDEX idx_messages_created;
    END IF;
END
$$;

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_search_vector ON messages
    USING gin (search_vector);

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_kind ON messages (kind, id);

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_created ON messages (created_at, id);

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_search;

-- Statistics of the new column: search plans its steps from them (queries/search.sql).
ANALYZE messages;

UPDATE schema_metadata SET schema_version = 15 WHERE schema_version < 15;
