-- Undo 0011: the feed and the summaries go (with their rows).
DROP TABLE IF EXISTS context_summaries;
DROP TABLE IF EXISTS agent_summaries;
DROP TABLE IF EXISTS activities;
UPDATE schema_metadata SET schema_version = 10 WHERE schema_version = 11;
