-- Undo 0045: keyed batches go (the keys stored on their first events stay, as 0044's).
DROP FUNCTION IF EXISTS ikigai_append_batch_keyed(BIGINT, TEXT, TEXT[], TEXT[], TEXT[], TEXT);

UPDATE schema_metadata SET schema_version = 44 WHERE schema_version = 45;
