-- post_mail(): the one place that writes a mail, its recipient rows and its sender's activity
-- (issue 18). send_mail and publish_mail (mail and recipient rows), the review events, review
-- iterations and the three plan changes (mail, recipient rows and activity) each had their own
-- copy of these INSERTs; they now call this function from their statement, so each is still
-- one statement, and a refused change, which never calls it, writes nothing. What it keeps:
-- - the mail is written unless it would reach no one: with no recipient ids and no topic (a
--   review or plan change whose audience is empty, or only the actor) there is no mail; a topic
--   mail is always written (it is the topic's log entry, even with no subscriber to copy it to);
-- - one unread recipient row per id of recipient_ids; mail.recipients is the names the caller
--   passes (the same identities, sorted COLLATE "C"); a used (sender, idempotency_key) writes
--   nothing (ON CONFLICT DO NOTHING, as send_mail and publish_mail always did);
-- - with activity_type, the sender's activity: activity_metadata plus the key mail_id (the
--   mail's id, null when no mail was written), written whether or not there is a mail;
-- - it returns the mail row written (RETURNING *), or NULL when none was.
-- What a caller must know (PostgreSQL's rules for a volatile function called from a statement
-- whose CTEs write):
-- - it reads no table: every check and lock stays in the calling statement, which passes ids;
-- - the calling statement does not see the rows it writes (its snapshot is older), so it uses
--   the row returned, never reads the mail back;
-- - it takes a new snapshot: it sees the writes of the calling statement's CTEs that ran
--   before the call (those its arguments read), so the foreign keys of its rows are checked
--   against them (plan_submit mails a reviewer it has just registered);
-- - call it in a CTE's select list, where WHERE has filtered the rows first, once per change:
--   SELECT post_mail(...) AS mail FROM u, f (in FROM, a join qual could be evaluated after the
--   call). Such a CTE runs only when something reads it (unlike an INSERT or UPDATE CTE), so
--   the main query or a writing CTE must read it. Never SELECT (post_mail(...)).*, which calls
--   it once per column;
-- - arguments are passed by name (thread_id => ...): tests/unit/test_activity_types.py reads
--   activity_type => in every call.
-- Cost: a call adds a nested executor, snapshot and trigger level to its statement: about
-- 40-80 us of server CPU (measured on 2 busy cores), 3 to 5 per cent of a committed send or
-- review decision. Runs in one transaction; CREATE OR REPLACE makes applying it again harmless.
-- depends: 0015-search-stored-vectors

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

UPDATE schema_metadata SET schema_version = 16 WHERE schema_version < 16;
