-- Undo 0010: 0008's statement trigger notifies again on every update; the lease index goes.
DROP TRIGGER IF EXISTS queue_items_notify_update ON queue_items;
CREATE TRIGGER queue_items_notify_update
    AFTER UPDATE ON queue_items REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION queue_notify_available();
DROP FUNCTION IF EXISTS queue_notify_row();
DROP INDEX IF EXISTS queue_items_lease_idx;
UPDATE schema_metadata SET schema_version = 9 WHERE schema_version = 10;
