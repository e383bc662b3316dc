-- Undo 0026: hand-offs still pending are made unread again (no waiter of an older release
-- will take them: re-delivery, never a loss), then mail_waiters, mail_waiters_reap(),
-- mail_waiters_take() and mail_waiters_drop() go, post_mail() is 0016's again and new
-- recipient rows notify ikigai_mail only when unread (0017's mail_notify_insert).
UPDATE mail_recipients AS r
SET state = 'unread', read_at = NULL, state_changed_at = ikigai_now()
FROM mail_waiters AS w
WHERE w.handed_mail_id IS NOT NULL
  AND r.identity_id = w.identity_id AND r.mail_id = w.handed_mail_id
  AND r.state = 'read' AND r.acked_at IS NULL AND r.state_changed_at = w.handed_at;
DROP FUNCTION IF EXISTS mail_waiters_reap(BIGINT);
DROP FUNCTION IF EXISTS mail_waiters_take(BIGINT);
DROP FUNCTION IF EXISTS mail_waiters_drop(BIGINT[]);
DROP TABLE IF EXISTS mail_waiters;
DROP FUNCTION IF EXISTS post_mail(TEXT, BIGINT, BIGINT[], TEXT[], TEXT, TEXT, TEXT, JSONB, TEXT,
                                  TEXT, JSONB, BIGINT, TIMESTAMPTZ, JSONB, TEXT, TEXT, BIGINT,
                                  BIGINT, BIGINT[]);
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
    log_offset        BIGINT DEFAULT NULL
) RETURNS mail
LANGUAGE sql VOLATILE
AS $fn$
    -- Parameters are qualified (post_mail.x): in SQL functions a column of the same name wins.
    WITH m AS (
        INSERT INTO mail (thread_id, parent_id, sender_id, recipients, subject, body, priority,
                          deadline_at, attachments, metadata, idempotency_key, request_hash,
                          topic_id, log_offset)
        SELECT post_mail.thread_id, post_mail.parent_id, post_mail.sender_id,
               post_mail.recipients, post_mail.subject, post_mail.body, post_mail.priority,
               post_mail.deadline_at, post_mail.attachments, post_mail.metadata,
               post_mail.idempotency_key, post_mail.request_hash, post_mail.topic_id,
               post_mail.log_offset
        WHERE cardinality(post_mail.recipient_ids) > 0 OR post_mail.topic_id IS NOT NULL
        ON CONFLICT (sender_id, idempotency_key) DO NOTHING
        RETURNING *
    ), delivered AS (
        INSERT INTO mail_recipients (mail_id, identity_id)
        SELECT m.id, r.id FROM m, unnest(post_mail.recipient_ids) AS r(id)
    ), act AS (
        INSERT INTO activities (identity_id, type, description, metadata)
        SELECT post_mail.sender_id, post_mail.activity_type, post_mail.description,
               COALESCE(post_mail.activity_metadata, '{}')
               || jsonb_build_object('mail_id', (SELECT m.id FROM m))
        WHERE post_mail.activity_type IS NOT NULL
    )
    SELECT m.* FROM m
$fn$;

CREATE OR REPLACE FUNCTION mail_notify_insert() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM ikigai_notify_ids('ikigai_mail',
                              (SELECT string_agg(DISTINCT identity_id::text, ',')
                               FROM changed WHERE state = 'unread'));
    PERFORM ikigai_notify_ids('ikigai_thread',
                              (SELECT string_agg(DISTINCT hashtext(m.thread_id)::text, ',')
                               FROM mail AS m
                               WHERE m.id IN (SELECT mail_id FROM changed)));
    RETURN NULL;
END
$fn$;

UPDATE schema_metadata SET schema_version = 25 WHERE schema_version = 26;
