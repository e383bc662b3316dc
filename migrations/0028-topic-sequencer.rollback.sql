-- Undo 0028: sequence what is pending, then offsets go back to mail.log_offset (kept).
DO $undo$
BEGIN
    PERFORM s.* FROM (SELECT DISTINCT topic_id FROM topic_log WHERE log_offset IS NULL) AS p,
                     LATERAL sequence_topic(p.topic_id, ARRAY[]::BIGINT[]) AS s;
END
$undo$;
ALTER TABLE mail DROP CONSTRAINT IF EXISTS mail_topic_offset_check;
UPDATE mail AS m SET log_offset = l.log_offset FROM topic_log AS l WHERE l.mail_id = m.id;
ALTER TABLE mail ADD CONSTRAINT mail_topic_offset_check
    CHECK ((topic_id IS NULL) = (log_offset IS NULL));
CREATE UNIQUE INDEX IF NOT EXISTS mail_topic_offset_idx ON mail (topic_id, log_offset)
    WHERE topic_id IS NOT NULL;
CREATE OR REPLACE VIEW mail_view AS
SELECT m.id, m.thread_id, m.parent_id, m.sender_id, s.name AS sender,
       m.recipients,
       m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
       m.idempotency_key, m.deleted_by_sender, m.created_at,
       m.topic_id, t.name AS topic, m.log_offset
FROM mail AS m
JOIN identities AS s ON s.id = m.sender_id
LEFT JOIN topics AS t ON t.id = m.topic_id;
DROP FUNCTION IF EXISTS sequence_topic(BIGINT, BIGINT[]);
DROP TABLE IF EXISTS topic_log;
UPDATE schema_metadata SET schema_version = 27 WHERE schema_version = 28;
