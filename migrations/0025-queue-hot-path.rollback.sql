-- Undo 0025: the open and dead indexes read state again, the lease index comes back, outcome
-- goes (state always held the same meaning), default fillfactor; the version goes back to 23.
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
UPDATE schema_metadata SET schema_version = 23 WHERE schema_version = 25;
