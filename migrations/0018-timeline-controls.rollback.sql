-- Undo 0018: the version goes back to 17 and the timeline's partial index is dropped
-- CONCURRENTLY (outside a transaction, like 0018). Idempotent.
UPDATE schema_metadata SET schema_version = 17 WHERE schema_version = 18;

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_session_controls;
