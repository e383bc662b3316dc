-- Mail hand-off (issue 22, the wake-up hot path): a send hands its mail to a waiting `wait` in
-- the sender's own transaction, so the woken waiter no longer pays a durable commit (a WAL
-- flush, about 0.5 ms) of its own before it returns the mail.
-- - mail_waiters: one row per `wait` asleep outside store.transaction() with a timeout. Its id
--   is chosen by the waiter (63 random bits) before it registers, so an interrupted waiter can
--   always withdraw it, committed or not; seq orders the registrations. liveness names the
--   session-level advisory lock (bigint key) that the waiter's store holds on its one LISTEN
--   connection (notify.py): the row is live while that lock is held and expires_at (the
--   wait's deadline plus a grace) has not passed; dead otherwise (the process or its listener
--   connection is gone, or the waiter overstayed). A dead row's key can be locked
--   (pg_try_advisory_xact_lock_shared succeeds), which is how everyone tells.
-- - send_mail (queries/mail.sql) takes, per recipient, its oldest live registration without a
--   hand-off (FOR UPDATE SKIP LOCKED: senders never wait on each other nor on a waiter), sets
--   handed_mail_id and handed_at, and has post_mail() insert that recipient's row already read
--   (read_at = state_changed_at = handed_at): one statement, one durable commit, the sender's.
-- - Whoever deletes a registration owns its hand-off: the waiter (it returns the mail) or
--   mail_waiters_drop() (a cancelled waiter, or mail_waiters_reap() for dead rows: the mail
--   becomes unread again, if it is still read as the hand-off left it and not acked). Row
--   locks make them exclusive: exactly one of them. A statement that acts on a hand-off must
--   see it in its own snapshot (a DELETE that waited for the sender sees the sender's recipient
--   row only in a later statement): mail_waiters_take() requires it in its WHERE, the
--   waiter's leave deletes only rows without one, mail_waiters_drop() uses two statements.
-- - New recipient rows notify ikigai_mail whether unread or handed over (mail_notify_insert):
--   the waiter a mail was handed to learns it from that notification.
-- Invariants: a mail `wait` returns was marked read by a durable commit; a hand-off whose
-- waiter dies before taking it becomes unread again (re-delivery, never a loss). The table is
-- logged, never UNLOGGED: a crash that emptied it would leave handed mail read with no one to
-- undo it. Runs in one transaction.
-- depends: 0025-queue-hot-path

CREATE TABLE IF NOT EXISTS mail_waiters (
    -- Chosen by the waiter before it registers (63 random bits), so an interruption during
    -- its register call can still withdraw it (a no-op if it was never committed).
    id             BIGINT PRIMARY KEY,
    seq            BIGINT GENERATED ALWAYS AS IDENTITY,  -- registration order
    identity_id    BIGINT NOT NULL REFERENCES identities (id),
    liveness       BIGINT NOT NULL,
    expires_at     TIMESTAMPTZ NOT NULL,
    handed_mail_id BIGINT,
    handed_at      TIMESTAMPTZ,
    CONSTRAINT mail_waiters_handed_check CHECK ((handed_mail_id IS NULL) = (handed_at IS NULL))
);
-- What a send probes per recipient (oldest first), and the reaper per identity.
CREATE INDEX IF NOT EXISTS mail_waiters_identity_idx ON mail_waiters (identity_id, seq);

-- Delete the registrations :ids and make the mail handed to them unread again where it is
-- still as the hand-off left it (read, not acked, state_changed_at = handed_at); returns how
-- many registrations went. Two statements, so two snapshots: the DELETE may wait for a sender
-- that is handing mail over and then deletes the handed version, whose recipient row only the
-- UPDATE's newer snapshot sees (one statement would miss it and leave the mail read).
CREATE OR REPLACE FUNCTION mail_waiters_drop(ids BIGINT[]) RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    gone_identity BIGINT[];
    gone_mail     BIGINT[];
    gone_at       TIMESTAMPTZ[];
BEGIN
    WITH gone AS (
        DELETE FROM mail_waiters AS w WHERE w.id = ANY(ids)
        RETURNING w.identity_id, w.handed_mail_id, w.handed_at
    )
    SELECT array_agg(gone.identity_id), array_agg(gone.handed_mail_id), array_agg(gone.handed_at)
    INTO gone_identity, gone_mail, gone_at
    FROM gone;
    UPDATE mail_recipients AS r
    SET state = 'unread', read_at = NULL, state_changed_at = ikigai_now()
    FROM unnest(gone_identity, gone_mail, gone_at) AS g(identity_id, mail_id, handed_at)
    WHERE r.identity_id = g.identity_id AND r.mail_id = g.mail_id
      AND r.state = 'read' AND r.acked_at IS NULL AND r.state_changed_at = g.handed_at;
    RETURN COALESCE(cardinality(gone_identity), 0);
END
$fn$;

-- The waiter's take (queries/mail.sql mail_wait_take, on the wake-up hot path): delete
-- registration waiter_id if a mail was handed to it, and return that mail with its recipient
-- row (InboxItem's columns: mail_view's without topic and log_offset, which a hand-off never
-- has, and mailbox's effective state). No row: nothing handed over yet, or the registration
-- is gone (reaped). Deleting it makes the mail the waiter's (the reaper can no longer undo
-- it); it deletes only a row whose hand-off its own snapshot sees, so the joins see the
-- sender's mail. synchronous_commit is off for the caller's transaction (the take's own
-- statement): the mail was marked read by the sender's durable commit; losing this delete on
-- a crash brings the registration back, dead (the crash ended its lock), and the reaper makes
-- the mail unread again: a re-delivery, never a loss. PL/pgSQL with a generic plan, so each
-- connection plans the query once, at its first call, and keeps the plan (planned per call,
-- the same statement's round trip measured about three times this one's; a plain PL/pgSQL
-- plan is planned anew for each of a connection's first five calls, twice this one's).
CREATE OR REPLACE FUNCTION mail_waiters_take(waiter_id BIGINT)
RETURNS TABLE (id BIGINT, thread_id TEXT, parent_id BIGINT, sender TEXT, recipients TEXT[],
               subject TEXT, body TEXT, priority TEXT, deadline_at TIMESTAMPTZ,
               attachments JSONB, metadata JSONB, idempotency_key TEXT,
               deleted_by_sender BOOLEAN, created_at TIMESTAMPTZ, state TEXT,
               read_at TIMESTAMPTZ, acked_at TIMESTAMPTZ, snoozed_until TIMESTAMPTZ)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $fn$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    WITH d AS (
        DELETE FROM mail_waiters AS w
        WHERE w.id = mail_waiters_take.waiter_id AND w.handed_mail_id IS NOT NULL
        RETURNING w.identity_id, w.handed_mail_id
    )
    SELECT m.id, m.thread_id, m.parent_id, s.name, m.recipients, m.subject, m.body,
           m.priority, m.deadline_at, m.attachments, m.metadata, m.idempotency_key,
           m.deleted_by_sender, m.created_at,
           CASE WHEN r.state = 'snoozed' AND r.snoozed_until <= ikigai_now() THEN 'unread'
                ELSE r.state END,
           r.read_at, r.acked_at,
           CASE WHEN r.state = 'snoozed' AND r.snoozed_until <= ikigai_now() THEN NULL
                ELSE r.snoozed_until END
    FROM d
    JOIN mail_recipients AS r ON r.identity_id = d.identity_id AND r.mail_id = d.handed_mail_id
    JOIN mail AS m ON m.id = d.handed_mail_id
    JOIN identities AS s ON s.id = m.sender_id;
END
$fn$;

-- Drop the dead registrations (of only_identity, or of everyone when NULL): expired, or their
-- liveness lock is free. FOR UPDATE SKIP LOCKED: a row a sender or a waiter is handling is
-- theirs now, and no sender hands mail to a row locked here.
CREATE OR REPLACE FUNCTION mail_waiters_reap(only_identity BIGINT) RETURNS integer
LANGUAGE sql VOLATILE
AS $fn$
    SELECT mail_waiters_drop(ARRAY(
        SELECT w.id FROM mail_waiters AS w
        WHERE (only_identity IS NULL OR w.identity_id = only_identity)
          AND (w.expires_at <= ikigai_now() OR pg_try_advisory_xact_lock_shared(w.liveness))
        FOR UPDATE SKIP LOCKED
    ))
$fn$;

-- post_mail() of 0016 plus handed_ids: the recipients whose rows are inserted read (a hand-off).
DROP FUNCTION IF EXISTS post_mail(TEXT, BIGINT, BIGINT[], TEXT[], TEXT, TEXT, TEXT, JSONB, TEXT,
                                  TEXT, JSONB, BIGINT, TIMESTAMPTZ, JSONB, TEXT, TEXT, BIGINT,
                                  BIGINT);
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
        INSERT INTO mail_recipients (mail_id, identity_id, state, read_at)
        SELECT m.id, r.id,
               CASE WHEN r.id = ANY(post_mail.handed_ids) THEN 'read' ELSE 'unread' END,
               CASE WHEN r.id = ANY(post_mail.handed_ids) THEN ikigai_now() END
        FROM m, unnest(post_mail.recipient_ids) AS r(id)
    ), act AS (
        INSERT INTO activities (identity_id, type, description, metadata)
        SELECT post_mail.sender_id, post_mail.activity_type, post_mail.description,
               COALESCE(post_mail.activity_metadata, '{}')
               || jsonb_build_object('mail_id', (SELECT m.id FROM m))
        WHERE post_mail.activity_type IS NOT NULL
    )
    SELECT m.* FROM m
$fn$;

-- New recipient rows: every recipient (unread, or read by a hand-off whose waiter waits for
-- this very notification) and their threads.
CREATE OR REPLACE FUNCTION mail_notify_insert() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM ikigai_notify_ids('ikigai_mail',
                              (SELECT string_agg(DISTINCT identity_id::text, ',') FROM changed));
    PERFORM ikigai_notify_ids('ikigai_thread',
                              (SELECT string_agg(DISTINCT hashtext(m.thread_id)::text, ',')
                               FROM mail AS m
                               WHERE m.id IN (SELECT mail_id FROM changed)));
    RETURN NULL;
END
$fn$;

UPDATE schema_metadata SET schema_version = 26 WHERE schema_version < 26;
