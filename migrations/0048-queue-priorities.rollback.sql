-- Undo 0048: claims take the oldest message again, whatever its priority.
DROP INDEX IF EXISTS queue_items_open_idx;
CREATE INDEX queue_items_open_idx ON queue_items (topic_id, mail_id) WHERE outcome IS NULL;
ALTER TABLE queue_items DROP COLUMN IF EXISTS priority_rank;

UPDATE schema_metadata SET schema_version = 47 WHERE schema_version = 48;
