-- Undo 0021: the keys go (the sessions they named stay); the version goes back to 20.
DROP TABLE IF EXISTS session_keys;
UPDATE schema_metadata SET schema_version = 20 WHERE schema_version = 21;
