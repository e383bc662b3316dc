-- Undo 0020: the keys go (the sessions they named stay); the version goes back to 19.
DROP TABLE IF EXISTS session_keys;
UPDATE schema_metadata SET schema_version = 19 WHERE schema_version = 20;
