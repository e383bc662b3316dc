-- Batches of topic mail with an idempotency key: a publish_many retried after ConnectionLost
-- (or a crash between the commit and the reply) stores its mails once. A fourth overload of
-- post_mail() (0039's batch overload plus idempotency_key): with a key, the batch's first
-- mail is inserted alone, carrying the key and the batch's request hash (request_hashes[1]),
-- ON CONFLICT (sender_id, idempotency_key) DO NOTHING: when the sender's mail already holds
-- the key (a single send or publish, or another batch; one key space per sender), or a racing
-- insert with the key commits first, nothing of the batch is written and no row is returned
-- (the library then finds what holds the key: queries/topics.sql, published_batch). Only
-- then are the other mails written, so a batch is stored whole or not at all. The mails'
-- thread ids are the library's (derived from the sender, key and position for a keyed batch,
-- which is how a retry finds the batch's other mails). Without a key, what 0039's overload
-- does. 0039's overload stays (the library before this migration calls it).
-- depends: 0050-queue-wakes-while-listened

CREATE OR REPLACE FUNCTION post_mail(
    thread_ids      TEXT[],
    sender_id       BIGINT,
    recipient_ids   BIGINT[],
    recipients      TEXT[],
    subjects        TEXT[],
    bodies          TEXT[],
    priorities      TEXT[],
    attachments     JSONB[],
    metadata        JSONB[],
    request_hashes  TEXT[],
    topic_id        BIGINT,
    idempotency_key TEXT
) RETURNS SETOF mail
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    n INTEGER := cardinality(thread_ids);
    first_id BIGINT;
BEGIN
    IF idempotency_key IS NULL THEN
        RETURN QUERY
        SELECT * FROM post_mail(thread_ids => post_mail.thread_ids,
                                sender_id => post_mail.sender_id,
                                recipient_ids => post_mail.recipient_ids,
                                recipients => post_mail.recipients,
                                subjects => post_mail.subjects, bodies => post_mail.bodies,
                                priorities => post_mail.priorities,
                                attachments => post_mail.attachments,
                                metadata => post_mail.metadata,
                                request_hashes => post_mail.request_hashes,
                                topic_id => post_mail.topic_id);
        RETURN;
    END IF;
    IF n < 1 OR cardinality(subjects) <> n OR cardinality(bodies) <> n
       OR cardinality(priorities) <> n OR cardinality(attachments) <> n
       OR cardinality(metadata) <> n OR cardinality(request_hashes) <> n THEN
        RAISE EXCEPTION 'post_mail: the batch''s arrays are empty or have different lengths'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO mail AS x (thread_id, sender_id, recipients, subject, body, priority,
                           attachments, metadata, idempotency_key, request_hash, topic_id)
    VALUES (thread_ids[1], post_mail.sender_id, post_mail.recipients, subjects[1], bodies[1],
            priorities[1], attachments[1], metadata[1], post_mail.idempotency_key,
            request_hashes[1], post_mail.topic_id)
    ON CONFLICT (sender_id, idempotency_key) DO NOTHING
    RETURNING x.id INTO first_id;
    IF first_id IS NULL THEN
        RETURN;  -- the key is taken: nothing of the batch is written
    END IF;
    RETURN QUERY
    WITH rest AS (
        INSERT INTO mail AS x (thread_id, sender_id, recipients, subject, body, priority,
                               attachments, metadata, topic_id)
        SELECT a.thread_id, post_mail.sender_id, post_mail.recipients, a.subject, a.body,
               a.priority, a.attachments, a.metadata, post_mail.topic_id
        FROM unnest(post_mail.thread_ids[2:], post_mail.subjects[2:], post_mail.bodies[2:],
                    post_mail.priorities[2:], post_mail.attachments[2:],
                    post_mail.metadata[2:]) WITH ORDINALITY
             AS a (thread_id, subject, body, priority, attachments, metadata, n)
        ORDER BY a.n
        RETURNING x.*
    ), written AS (
        SELECT * FROM mail AS f WHERE f.id = first_id
        UNION ALL
        SELECT * FROM rest
    ), copies AS (
        INSERT INTO mail_recipients (mail_id, identity_id)
        SELECT w.id, r.id FROM written AS w, unnest(post_mail.recipient_ids) AS r (id)
    )
    SELECT * FROM written ORDER BY written.id;
END
$fn$;

UPDATE schema_metadata SET schema_version = 51 WHERE schema_version < 51;
