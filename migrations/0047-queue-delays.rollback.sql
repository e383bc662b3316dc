-- Undo 0047: delays go; a delayed message becomes claimable at once.
ALTER TABLE queue_items DROP COLUMN IF EXISTS available_at;

UPDATE schema_metadata SET schema_version = 46 WHERE schema_version = 47;
