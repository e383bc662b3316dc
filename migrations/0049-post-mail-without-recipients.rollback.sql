-- Undo 0049: 0033's post_mail(), which runs the recipients' INSERT for every mail.
CREATE OR REPLACE FUNCTION post_mail(
    thread_id         TEXT,
    sender_id         BIGINT,
    recipient_ids     BIGINT[],
    recipients        TEXT[],
    subject           TEXT,
    body              TEXT,
    priority          TEXT,
    metadata          JSONB,
    activity_type     TEXT DEFAULT NULL,
    description       TEXT DEFAULT NULL,
    activity_metadata JSONB DEFAULT NULL,
    parent_id         BIGINT DEFAULT NULL,
    deadline_at       TIMESTAMPTZ DEFAULT NULL,
    attachments       JSONB DEFAULT NULL,
    idempotency_key   TEXT DEFAULT NULL,
    request_hash      TEXT DEFAULT NULL,
    topic_id          BIGINT DEFAULT NULL,
    log_offset        BIGINT DEFAULT NULL,
    handed_ids        BIGINT[] DEFAULT NULL
) RETURNS mail
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    written mail;
BEGIN
    IF cardinality(post_mail.recipient_ids) > 0 OR post_mail.topic_id IS NOT NULL THEN
        INSERT INTO mail AS x (thread_id, parent_id, sender_id, recipients, subject, body,
                               priority, deadline_at, attachments, metadata, idempotency_key,
                               request_hash, topic_id, log_offset)
        VALUES (post_mail.thread_id, post_mail.parent_id, post_mail.sender_id,
                post_mail.recipients, post_mail.subject, post_mail.body, post_mail.priority,
                post_mail.deadline_at, post_mail.attachments, post_mail.metadata,
                post_mail.idempotency_key, post_mail.request_hash, post_mail.topic_id,
                post_mail.log_offset)
        ON CONFLICT (sender_id, idempotency_key) DO NOTHING
        RETURNING x.* INTO written;
        IF written.id IS NOT NULL THEN
            INSERT INTO mail_recipients (mail_id, identity_id, state, read_at)
            SELECT written.id, r.id,
                   CASE WHEN r.id = ANY (post_mail.handed_ids) THEN 'read' ELSE 'unread' END,
                   CASE WHEN r.id = ANY (post_mail.handed_ids) THEN ikigai_now() END
            FROM unnest(post_mail.recipient_ids) AS r (id);
        END IF;
    END IF;
    IF post_mail.activity_type IS NOT NULL THEN
        INSERT INTO activities (identity_id, type, description, metadata)
        VALUES (post_mail.sender_id, post_mail.activity_type, post_mail.description,
                COALESCE(post_mail.activity_metadata, '{}')
                || jsonb_build_object('mail_id', written.id));
    END IF;
    IF written.id IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN written;
END
$fn$;

UPDATE schema_metadata SET schema_version = 48 WHERE schema_version = 49;
