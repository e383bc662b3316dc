-- Topic offsets from a sequencer (issue 38): publishes to one topic no longer commit one at
-- a time.
-- - Until 0027, publish took topics.next_offset under the topic row's lock, held to its commit
--   (fsync included): gapless and in commit order, but one publish per topic per commit.
-- - Now each topic has a sequencer lock (a transaction-scoped advisory lock, key
--   hashtextextended('topic-sequencer:' || topic id, 7)). A publish that finds it free, with
--   no pending row of the topic visible, takes it and gives its mail the next offset in the
--   same statement (queries/topics.sql: publish_mail, publish_mails). A publish that finds it
--   taken does not wait: it inserts its mail with a pending row in topic_log (log_offset
--   NULL) and commits; then sequence_topic() (the publisher runs it right after its commit:
--   sequence_mail) waits for the lock, gives every committed pending row of the topic the
--   next offsets in mail id order, moves next_offset past them and commits. One run
--   sequences everything committed so far (the publishers that wait behind it find their rows
--   done and write nothing).
-- - Offsets live in topic_log (mail_id, topic_id, log_offset), a narrow table: sequencing
--   updates it, never mail (whose generated search vector and GIN index make an update cost
--   as much as the insert). mail.log_offset is no longer written nor read (NULL, kept for
--   post_mail()'s signature); mail_view reads the offset from topic_log.
-- Why gapless and in order for every reader: offsets are assigned only by a transaction
-- holding the topic's sequencer lock (a publish that took it, or a sequencer run), from
-- next_offset as the last holder left it (a publish's UPDATE rereads the newest row version;
-- a run reads it in a snapshot taken after the lock), to rows that commit with the
-- assignment or were committed before it (a rollback or a reused idempotency key writes no
-- row, so it takes no offset). A holder commits before the next one gets the lock, and a
-- transaction leaves the snapshots' in-progress set before it releases its locks, so any
-- snapshot that sees a later holder's offsets sees every earlier holder's. A reader that read up to offset N never later sees
-- a new row at N or below, and offsets have no holes (topic_log_offset_idx refuses a
-- duplicate). A publish inside a caller's transaction takes the lock or sequences in that
-- transaction (the lock is then held to the caller's commit: serialised, as before). Pending rows are never visible in a topic's log; queue claims and inbox copies
-- do not need an offset and are visible at the publish's commit.
-- Wake-ups: the inbox copies of a broadcast publish notify ikigai_mail on the publish's
-- commit (as before); the sequencer notifies ikigai_mail again for the topic's subscribers on
-- its commit, so a waiter that read the log before the offset existed is woken once more.
-- Existing offsets are kept (copied into topic_log); next_offset is unchanged.
-- depends: 0027-runtime-stores

CREATE TABLE IF NOT EXISTS topic_log (
    mail_id    BIGINT PRIMARY KEY REFERENCES mail (id) ON DELETE CASCADE,
    topic_id   BIGINT NOT NULL,  -- mail.topic_id (its foreign key deletes the mail, then this)
    log_offset BIGINT            -- NULL: committed, not sequenced yet
);
-- The log in offset order (NULLs are distinct: pending rows never clash).
CREATE UNIQUE INDEX IF NOT EXISTS topic_log_offset_idx ON topic_log (topic_id, log_offset);
-- What the sequencer reads: a topic's pending rows, by mail id.
CREATE INDEX IF NOT EXISTS topic_log_pending_idx ON topic_log (topic_id, mail_id)
    WHERE log_offset IS NULL;

INSERT INTO topic_log (mail_id, topic_id, log_offset)
SELECT id, topic_id, log_offset FROM mail WHERE topic_id IS NOT NULL
ON CONFLICT (mail_id) DO NOTHING;

ALTER TABLE mail DROP CONSTRAINT IF EXISTS mail_topic_offset_check;
DROP INDEX IF EXISTS mail_topic_offset_idx;
UPDATE mail SET log_offset = NULL WHERE log_offset IS NOT NULL;
ALTER TABLE mail ADD CONSTRAINT mail_topic_offset_check CHECK (log_offset IS NULL);

CREATE OR REPLACE VIEW mail_view AS
SELECT m.id, m.thread_id, m.parent_id, m.sender_id, s.name AS sender,
       m.recipients,
       m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
       m.idempotency_key, m.deleted_by_sender, m.created_at,
       m.topic_id, t.name AS topic, l.log_offset
FROM mail AS m
JOIN identities AS s ON s.id = m.sender_id
LEFT JOIN topics AS t ON t.id = m.topic_id
LEFT JOIN topic_log AS l ON l.mail_id = m.id;

-- Sequence a topic: give every committed pending row of topic :topic_id the next offsets, in
-- mail id order, and return (mail_id, log_offset) of the rows in :mails. When every row of
-- a non-empty :mails is sequenced already, they are returned without taking the lock.
-- Each statement of a plpgsql function takes a fresh snapshot (READ COMMITTED), so the
-- statements after the lock see every run committed before it (a lock is released after its
-- holder's commit is visible): no row is sequenced twice, no offset given twice (and
-- topic_log_offset_idx would refuse it).
CREATE OR REPLACE FUNCTION sequence_topic(topic BIGINT, mails BIGINT[])
RETURNS TABLE (mail_id BIGINT, log_offset BIGINT)
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    next BIGINT;
    kind_ TEXT;
    n BIGINT;
BEGIN
    IF cardinality(mails) > 0
       AND NOT EXISTS (SELECT 1 FROM topic_log AS l
                       WHERE l.mail_id = ANY (mails) AND l.log_offset IS NULL) THEN
        RETURN QUERY SELECT l.mail_id, l.log_offset FROM topic_log AS l
                     WHERE l.mail_id = ANY (mails) ORDER BY l.mail_id;
        RETURN;
    END IF;
    -- The topic's sequencer lock: an advisory lock, not the topic row's, so a publisher that
    -- waited for the run that sequenced its mail finds it done and leaves without having
    -- written anything (a row lock would give it a transaction id, and its commit a WAL flush).
    PERFORM pg_advisory_xact_lock(hashtextextended('topic-sequencer:' || topic, 7));
    IF cardinality(mails) > 0
       AND NOT EXISTS (SELECT 1 FROM topic_log AS l
                       WHERE l.mail_id = ANY (mails) AND l.log_offset IS NULL) THEN
        RETURN QUERY SELECT l.mail_id, l.log_offset FROM topic_log AS l
                     WHERE l.mail_id = ANY (mails) ORDER BY l.mail_id;
        RETURN;
    END IF;
    -- Only a sequencer, holding the lock, writes next_offset: this snapshot, taken after the
    -- lock, sees the last run's.
    SELECT t.next_offset, t.kind INTO next, kind_ FROM topics AS t WHERE t.id = topic;
    IF FOUND THEN
        WITH p AS (
            SELECT l.mail_id FROM topic_log AS l
            WHERE l.topic_id = topic AND l.log_offset IS NULL
            ORDER BY l.mail_id
            FOR UPDATE  -- a row deleted meanwhile drops out here, before it is numbered
        ), o AS (
            SELECT p.mail_id, next - 1 + row_number() OVER (ORDER BY p.mail_id) AS off FROM p
        ), u AS (
            UPDATE topic_log AS l SET log_offset = o.off FROM o WHERE l.mail_id = o.mail_id
            RETURNING 1
        )
        SELECT count(*) INTO n FROM u;
        IF n > 0 THEN
            UPDATE topics SET next_offset = next + n WHERE id = topic;
            IF kind_ = 'broadcast' THEN
                PERFORM ikigai_notify_ids(
                    'ikigai_mail',
                    (SELECT string_agg(s.identity_id::text, ',') FROM subscriptions AS s
                     WHERE s.topic_id = topic));
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT l.mail_id, l.log_offset FROM topic_log AS l
                 WHERE l.mail_id = ANY (mails) ORDER BY l.mail_id;
END
$fn$;

UPDATE schema_metadata SET schema_version = 28 WHERE schema_version < 28;
