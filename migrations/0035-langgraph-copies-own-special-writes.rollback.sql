-- Undo 0035: copies read their source's special writes again (the rows copies got stay: they
-- are the copies' own writes, which the reads of 0027 take first).
DROP FUNCTION IF EXISTS langgraph_copy_thread(TEXT, TEXT, TEXT);
DROP INDEX IF EXISTS idx_langgraph_writes_special;
UPDATE schema_metadata SET schema_version = 30 WHERE schema_version = 35;
