-- Undo 0010: drop the index of claimed queue rows.
DROP INDEX IF EXISTS queue_items_lease_idx;
UPDATE schema_metadata SET schema_version = 9 WHERE schema_version = 10;
