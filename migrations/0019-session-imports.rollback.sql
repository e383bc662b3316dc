-- Undo 0019: the import records go (imported sessions stay), the version goes back to 18.
UPDATE schema_metadata SET schema_version = 18 WHERE schema_version = 19;
DROP TABLE IF EXISTS session_imports;
