-- Undo 0014: the leases go (with their rows), and lease_key().
DROP TABLE IF EXISTS leases;
DROP FUNCTION IF EXISTS lease_key(text);
UPDATE schema_metadata SET schema_version = 13 WHERE schema_version = 14;
