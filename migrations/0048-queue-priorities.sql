-- Queue claims obey priority: an urgent message is claimed before a normal one, a normal one
-- before a low one, and within a priority the oldest first (until 0.9 claims took the oldest
-- whatever its mail's priority).
-- - queue_items.priority_rank: 0 urgent, 1 normal, 2 low, copied from the mail's priority when
--   the publish writes the row (queries/topics.sql: publish_mail, publish_mails). A mail's
--   priority never changes, so neither does its rank: a claim stays a HOT update (it changes
--   no column an index reads). A queue row written by raw SQL without it is normal.
-- - queue_items_open_idx becomes (topic_id, priority_rank, mail_id) WHERE outcome IS NULL: the
--   claim's walk (ORDER BY topic_id, priority_rank, mail_id, which only this index gives) still
--   stops at the first claimable row and never meets a done one. Every other reader of the
--   topic's open rows (counts, claim_refusal, delete's check) reads it by its topic_id prefix.
-- - Existing open and dead rows get their mail's rank. The index is rebuilt inside the
--   migration's transaction: writes to queue_items wait for it (a scan of the table, done rows
--   included).
-- Idempotent.
-- depends: 0047-queue-delays

ALTER TABLE queue_items ADD COLUMN IF NOT EXISTS priority_rank SMALLINT NOT NULL DEFAULT 1;

UPDATE queue_items AS q
SET priority_rank = CASE m.priority WHEN 'urgent' THEN 0 WHEN 'low' THEN 2 ELSE 1 END
FROM mail AS m
WHERE m.id = q.mail_id AND q.outcome IS DISTINCT FROM 'done' AND m.priority <> 'normal'
  AND q.priority_rank = 1;

DROP INDEX IF EXISTS queue_items_open_idx;
CREATE INDEX queue_items_open_idx ON queue_items (topic_id, priority_rank, mail_id)
    WHERE outcome IS NULL;

UPDATE schema_metadata SET schema_version = 48 WHERE schema_version < 48;
