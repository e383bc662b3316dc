-- A batch of mails is written by one post_mail() call (issue 38): an overload of post_mail()
-- (migration 0016's one place where mail and recipient rows are inserted) that takes arrays,
-- one element per mail, and writes every mail with one INSERT and every recipient row with
-- one more. publish_many's statement (queries/topics.sql, publish_mails) called the
-- single-mail post_mail() once per element: a PL/pgSQL call and two INSERTs per mail. With the
-- batch overload, the backend's CPU per message (batches of 100, 1 KB bodies) went from 150 to
-- 120 µs to a queue topic and from 178 to 133 µs to a broadcast topic with two subscribers.
-- What a batch writes: mails without an idempotency key, an activity, a parent, a deadline or
-- hand-offs (publish_many's); the same recipients (ids, and names as the recipients column)
-- for every mail; mail ids follow the arrays' order (the INSERT reads the elements in order);
-- the rows are returned in id order. Arrays of different lengths are refused (the INSERT would
-- pad the shorter ones with NULLs).
-- depends: 0038-citus-reviews-by-review

CREATE OR REPLACE FUNCTION post_mail(
    thread_ids     TEXT[],
    sender_id      BIGINT,
    recipient_ids  BIGINT[],
    recipients     TEXT[],
    subjects       TEXT[],
    bodies         TEXT[],
    priorities     TEXT[],
    attachments    JSONB[],
    metadata       JSONB[],
    request_hashes TEXT[],
    topic_id       BIGINT
) RETURNS SETOF mail
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    n INTEGER := cardinality(thread_ids);
BEGIN
    IF cardinality(subjects) <> n OR cardinality(bodies) <> n OR cardinality(priorities) <> n
       OR cardinality(attachments) <> n OR cardinality(metadata) <> n
       OR cardinality(request_hashes) <> n THEN
        RAISE EXCEPTION 'post_mail: the batch''s arrays have different lengths'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH written AS (
        INSERT INTO mail AS x (thread_id, sender_id, recipients, subject, body, priority,
                               attachments, metadata, request_hash, topic_id)
        SELECT a.thread_id, post_mail.sender_id, post_mail.recipients, a.subject, a.body,
               a.priority, a.attachments, a.metadata, a.request_hash, post_mail.topic_id
        FROM unnest(post_mail.thread_ids, post_mail.subjects, post_mail.bodies,
                    post_mail.priorities, post_mail.attachments, post_mail.metadata,
                    post_mail.request_hashes) WITH ORDINALITY
             AS a (thread_id, subject, body, priority, attachments, metadata, request_hash, n)
        ORDER BY a.n
        RETURNING x.*
    ), copies AS (
        INSERT INTO mail_recipients (mail_id, identity_id)
        SELECT w.id, r.id FROM written AS w, unnest(post_mail.recipient_ids) AS r (id)
    )
    SELECT * FROM written ORDER BY written.id;
END
$fn$;

UPDATE schema_metadata SET schema_version = 39 WHERE schema_version < 39;
