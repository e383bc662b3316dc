-- Undo 0005: drop the kind CHECK and the lineage function.
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_kind_check;
DROP FUNCTION IF EXISTS agent_replay_ranges(TEXT);
UPDATE schema_metadata SET schema_version = 4 WHERE schema_version = 5;
