-- Undo 0009: mail_view lists the recipient rows again (0008's view); the names go.
CREATE OR REPLACE VIEW mail_view AS
SELECT m.id, m.thread_id, m.parent_id, m.sender_id, s.name AS sender,
       ARRAY(SELECT i.name
             FROM mail_recipients AS r JOIN identities AS i ON i.id = r.identity_id
             WHERE r.mail_id = m.id
             ORDER BY i.name) AS recipients,
       m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
       m.idempotency_key, m.deleted_by_sender, m.created_at,
       m.topic_id, t.name AS topic, m.log_offset
FROM mail AS m
JOIN identities AS s ON s.id = m.sender_id
LEFT JOIN topics AS t ON t.id = m.topic_id;
ALTER TABLE mail DROP COLUMN IF EXISTS recipients;
UPDATE schema_metadata SET schema_version = 8 WHERE schema_version = 9;
