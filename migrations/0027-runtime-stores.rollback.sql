-- Undo 0027: the runtime stores' tables go (the sessions they used stay, with their events).
DROP INDEX IF EXISTS idx_messages_entry_uuid;
DROP TABLE IF EXISTS claude_transcripts;
DROP FUNCTION IF EXISTS langgraph_put(TEXT, TEXT, TEXT, TEXT, TEXT, JSONB, JSONB, TEXT[], TEXT[], TEXT[],
                                     BYTEA[], TEXT[]);
DROP FUNCTION IF EXISTS langgraph_blob_chain(BIGINT, TEXT, TEXT[], TEXT[], TEXT[], TEXT[]);
DROP FUNCTION IF EXISTS langgraph_lineage(BIGINT);
DROP TABLE IF EXISTS langgraph_writes;
DROP TABLE IF EXISTS langgraph_blobs;
DROP TABLE IF EXISTS langgraph_checkpoints;
DROP SEQUENCE IF EXISTS langgraph_row_id;
DROP TABLE IF EXISTS langgraph_threads;
UPDATE schema_metadata SET schema_version = 26 WHERE schema_version = 27;
