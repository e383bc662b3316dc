-- Undo 0044: keyed appends go, with the events' keys (the events stay). On Citus its shard
-- commands run one at a time (see 0044).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
END
$$;

DROP FUNCTION IF EXISTS ikigai_append_keyed(BIGINT, TEXT, TEXT, TEXT, JSONB, BIGINT, TEXT);
DROP INDEX IF EXISTS messages_idempotency_key_idx;
ALTER TABLE messages DROP COLUMN IF EXISTS idempotency_key;

UPDATE schema_metadata SET schema_version = 43 WHERE schema_version = 44;
