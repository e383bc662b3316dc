-- Undo 0003: drop the agent registry (a C-era table converted by 0003 is dropped, not restored).
DROP TABLE IF EXISTS agents;
UPDATE schema_metadata SET schema_version = 2 WHERE schema_version = 3;
