-- Undo 0024: appends probe session_listeners again (queries of the version before); the
-- version goes back to 23.
ALTER TABLE sessions DROP COLUMN IF EXISTS listened_until;
UPDATE schema_metadata SET schema_version = 23 WHERE schema_version = 24;
