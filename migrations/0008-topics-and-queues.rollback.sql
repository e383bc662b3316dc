-- Undo 0008: drops topics, subscriptions, offsets and queue state, and every topic mail (direct
-- mail stays); restores 0007's mail_view and parent_id constraint.
DROP VIEW IF EXISTS mail_view;
DELETE FROM mail WHERE topic_id IS NOT NULL;
DROP TABLE IF EXISTS queue_items;
DROP TABLE IF EXISTS consumer_offsets;
DROP TABLE IF EXISTS subscriptions;
ALTER TABLE mail DROP CONSTRAINT IF EXISTS mail_topic_offset_check;
DROP INDEX IF EXISTS mail_topic_offset_idx;
ALTER TABLE mail DROP COLUMN IF EXISTS log_offset;
ALTER TABLE mail DROP COLUMN IF EXISTS topic_id;
DROP TABLE IF EXISTS topics;
DROP FUNCTION IF EXISTS queue_notify_available();
ALTER TABLE mail DROP CONSTRAINT IF EXISTS mail_parent_id_fkey;
ALTER TABLE mail ADD CONSTRAINT mail_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES mail (id);
CREATE VIEW mail_view AS
SELECT m.id, m.thread_id, m.parent_id, m.sender_id, s.name AS sender,
       ARRAY(SELECT i.name
             FROM mail_recipients AS r JOIN identities AS i ON i.id = r.identity_id
             WHERE r.mail_id = m.id
             ORDER BY i.name) AS recipients,
       m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
       m.idempotency_key, m.deleted_by_sender, m.created_at
FROM mail AS m
JOIN identities AS s ON s.id = m.sender_id;
UPDATE schema_metadata SET schema_version = 7 WHERE schema_version = 8;
