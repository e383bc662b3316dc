-- Undo 0035: copies read their source's special writes again (the rows copies got stay: they
-- are the copies' own writes, which the reads of 0027 take first).
DROP FUNCTION IF EXISTS langgraph_copy_thread(TEXT, TEXT, TEXT);
DROP FUNCTION IF EXISTS langgraph_special_writes(BIGINT);
DROP INDEX IF EXISTS idx_langgraph_writes_special;
UPDATE schema_metadata SET schema_version = 33 WHERE schema_version = 35;
