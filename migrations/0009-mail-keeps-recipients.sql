-- A mail keeps the names it was sent to (Mail.to), fixed at send time. Before, mail_view
-- listed the mail's recipient rows, so purge_trash (which deletes recipient rows) removed a
-- name from the mail's `to`, from its thread's participants (reply) and from that identity's
-- view of the thread. Identities are never renamed or deleted, so names are stable.
-- Invariant: mail.recipients is the distinct recipient names sorted by code point (COLLATE
-- "C", as mail.py sorts them); a direct mail has one recipient row per name until purged; a
-- topic mail names the subscribers that got a copy (none for a queue topic).
-- Idempotent, and run on adopted C-era databases too (their schema_version is 9 already).
-- ikigai-adopt: run
-- depends: 0008-topics-and-queues

ALTER TABLE mail ADD COLUMN IF NOT EXISTS recipients TEXT[];
UPDATE mail AS m
SET recipients = ARRAY(SELECT i.name
                       FROM mail_recipients AS r JOIN identities AS i ON i.id = r.identity_id
                       WHERE r.mail_id = m.id
                       ORDER BY i.name COLLATE "C")
WHERE m.recipients IS NULL;
ALTER TABLE mail ALTER COLUMN recipients SET DEFAULT '{}';
ALTER TABLE mail ALTER COLUMN recipients SET NOT NULL;

CREATE OR REPLACE VIEW mail_view AS
SELECT m.id, m.thread_id, m.parent_id, m.sender_id, s.name AS sender,
       m.recipients,
       m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
       m.idempotency_key, m.deleted_by_sender, m.created_at,
       m.topic_id, t.name AS topic, m.log_offset
FROM mail AS m
JOIN identities AS s ON s.id = m.sender_id
LEFT JOIN topics AS t ON t.id = m.topic_id;

UPDATE schema_metadata SET schema_version = 9 WHERE schema_version < 9;
