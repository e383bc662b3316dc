-- Undo 0025: the open and dead indexes read state again, the lease index comes back, outcome
-- goes (state always held the same meaning), default fillfactor, 0010's row trigger notifies
-- again; the version goes back to 24.
CREATE OR REPLACE FUNCTION queue_notify_row() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM pg_notify('ikigai_queue', NEW.topic_id::text);
    RETURN NULL;
END
$fn$;
DROP TRIGGER IF EXISTS queue_items_notify_update ON queue_items;
CREATE TRIGGER queue_items_notify_update
    AFTER UPDATE OF state ON queue_items
    FOR EACH ROW WHEN (NEW.state = 'available' AND OLD.state <> 'available')
    EXECUTE FUNCTION queue_notify_row();
DROP INDEX IF EXISTS queue_items_open_idx;
DROP INDEX IF EXISTS queue_items_dead_idx;
ALTER TABLE queue_items DROP COLUMN IF EXISTS outcome;
ALTER TABLE queue_items RESET (fillfactor);
CREATE INDEX IF NOT EXISTS queue_items_open_idx ON queue_items (topic_id, mail_id)
    WHERE state IN ('available', 'claimed');
CREATE INDEX IF NOT EXISTS queue_items_dead_idx ON queue_items (topic_id, mail_id)
    WHERE state = 'dead';
CREATE INDEX IF NOT EXISTS queue_items_lease_idx ON queue_items (topic_id, lease_until)
    WHERE state = 'claimed';
UPDATE schema_metadata SET schema_version = 24 WHERE schema_version = 25;
