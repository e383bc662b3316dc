-- Agent mail (migration 0007): one mail row per send, one recipient row per recipient, each
-- with a guarded state. The mail row keeps the names it was sent to (mail.recipients,
-- migration 0009): purging a recipient row from trash does not change who a mail was sent to.
-- Reads go through the views mail_view (names instead of ids) and mailbox (effective state: a
-- snooze whose time has passed is unread). Order is mail.id.

-- name: send_mail(sender, recipients, thread_id, new_thread_id, parent_id, subject, body, priority, deadline_at, attachments, metadata, idempotency_key, request_hash)^
-- Send one mail: the mail row and one recipient row per name of :recipients (distinct,
-- sorted), atomically, in one statement. The sender and the recipients are locked FOR SHARE,
-- so a concurrent retire lands before (the send is refused) or after (the mail is delivered).
-- A recipient with a live waiter (mail_waiters, migration 0026) gets the mail handed over: its
-- row is inserted read and the waiter's registration names the mail; every other row is unread.
-- No row when the sender or a recipient is missing or retired, the parent is not in the
-- thread, or the sender already used :idempotency_key (mail.py explains which).
WITH s AS (
    SELECT id FROM identities WHERE name = :sender AND retired_at IS NULL FOR SHARE
), r AS (
    SELECT id FROM identities
    WHERE name = ANY(CAST(:recipients AS text[])) AND retired_at IS NULL
    FOR SHARE
), t AS (
    -- The thread (given, else the parent's, else the new one) and the parent's thread (NULL:
    -- no parent, or no such mail), from one lookup of the parent (three lookups made the plan
    -- cache re-plan this statement on every send once the INSERTs moved into post_mail).
    SELECT a.parent_id, p.thread_id AS parent_thread,
           COALESCE(CAST(:thread_id AS text), p.thread_id, CAST(:new_thread_id AS text))
               AS thread_id
    FROM (VALUES (CAST(:parent_id AS bigint))) AS a(parent_id)
    LEFT JOIN mail AS p ON p.id = a.parent_id
), w AS (
    -- Per recipient, its oldest live waiter without a hand-off (migration 0026): not expired,
    -- and its store's listener still holds the liveness lock (the shared try fails). SKIP
    -- LOCKED: a registration another sender or its waiter holds is passed over (its mail stays
    -- unread and the waiter, notified, claims it). Read twice below: evaluated once.
    SELECT x.id, x.identity_id
    FROM r CROSS JOIN LATERAL (
        SELECT mw.id, mw.identity_id
        FROM mail_waiters AS mw
        WHERE mw.identity_id = r.id AND mw.handed_mail_id IS NULL
          AND mw.expires_at > ikigai_now()
          AND NOT pg_try_advisory_xact_lock_shared(mw.liveness)
        ORDER BY mw.seq
        LIMIT 1
        FOR UPDATE OF mw SKIP LOCKED
    ) AS x
), posted AS (
    -- The mail and its recipient rows (post_mail, migration 0016), written only if the checks
    -- pass; read by m, which the main query reads.
    SELECT post_mail(
               thread_id => t.thread_id, parent_id => t.parent_id, sender_id => s.id,
               recipient_ids => ARRAY(SELECT r.id FROM r),
               recipients => CAST(:recipients AS text[]), subject => :subject, body => :body,
               priority => :priority, deadline_at => :deadline_at,
               attachments => CAST(:attachments AS jsonb), metadata => CAST(:metadata AS jsonb),
               idempotency_key => :idempotency_key, request_hash => :request_hash,
               handed_ids => ARRAY(SELECT w.identity_id FROM w)
           ) AS mail
    FROM s, t
    WHERE (SELECT count(*) FROM r) = cardinality(CAST(:recipients AS text[]))
      AND (t.parent_id IS NULL OR t.parent_thread = t.thread_id)
), m AS (
    -- The mail written (none when the sender already used the key).
    SELECT (posted.mail).* FROM posted WHERE (posted.mail).id IS NOT NULL
), handed AS (
    -- The hand-offs: each registration of w names the mail (whose row post_mail inserted read,
    -- read_at = state_changed_at = this statement's ikigai_now()), and its waiter's listener
    -- is told on its own channel, ikigai_handoff_<liveness> (notify.py), with the mail as
    -- the waiter returns it (InboxItem's columns) when that fits in a payload (under 8000
    -- bytes), else without it: the listener gives the waiter the mail and deletes the
    -- registration, so the woken waiter returns with no round trip of its own (issue 22).
    -- RETURNING runs for each row although nothing reads it: a data-modifying WITH runs to
    -- completion, after the main query, so this comes after the trigger's ikigai_mail.
    UPDATE mail_waiters AS mw
    SET handed_mail_id = m.id, handed_at = ikigai_now()
    FROM w, m
    WHERE mw.id = w.id
    RETURNING ikigai_notify(
        'ikigai_handoff_' || mw.liveness,
        (SELECT CASE WHEN octet_length(p.full) < 8000 THEN p.full
                     ELSE CAST(json_build_object('w', mw.id, 'i', mw.identity_id) AS text) END
         FROM (SELECT CAST(json_build_object(
                   'w', mw.id, 'i', mw.identity_id, 'm', json_build_object(
                       'id', m.id, 'thread_id', m.thread_id, 'parent_id', m.parent_id,
                       'sender', CAST(:sender AS text), 'recipients', m.recipients,
                       'subject', m.subject, 'body', m.body, 'priority', m.priority,
                       'deadline_at', m.deadline_at, 'attachments', m.attachments,
                       'metadata', m.metadata, 'idempotency_key', m.idempotency_key,
                       'deleted_by_sender', m.deleted_by_sender, 'created_at', m.created_at,
                       'state', 'read', 'read_at', ikigai_now(), 'acked_at', NULL,
                       'snoozed_until', NULL)) AS text) AS full) AS p))
)
SELECT m.id, m.thread_id, m.parent_id, CAST(:sender AS text) AS sender,
       m.recipients, m.subject, m.body, m.priority, m.deadline_at,
       m.attachments, m.metadata, m.idempotency_key, m.deleted_by_sender, m.created_at
FROM m;

-- name: mail_by_key(sender, idempotency_key)^
-- The mail a sender sent with an idempotency key, and the hash of its request.
SELECT v.*, m.request_hash
FROM mail AS m
JOIN identities AS s ON s.id = m.sender_id
JOIN mail_view AS v ON v.id = m.id
WHERE s.name = :sender AND m.idempotency_key = :idempotency_key;

-- name: send_refusal(sender, recipients, parent_id)^
-- Why send_mail wrote nothing, besides a used key (rare path): the sender's state, the
-- recipients that do not exist or are retired, and the parent's thread.
SELECT (SELECT CASE WHEN retired_at IS NULL THEN 'active' ELSE 'retired' END
        FROM identities WHERE name = :sender) AS sender_state,
       ARRAY(SELECT n FROM unnest(CAST(:recipients AS text[])) AS n
             WHERE NOT EXISTS (SELECT 1 FROM identities WHERE name = n)
             ORDER BY n) AS missing,
       ARRAY(SELECT name FROM identities
             WHERE name = ANY(CAST(:recipients AS text[])) AND retired_at IS NOT NULL
             ORDER BY name) AS retired,
       (SELECT thread_id FROM mail WHERE id = :parent_id) AS parent_thread,
       EXISTS (SELECT 1 FROM mail WHERE id = :parent_id) AS parent_exists;

-- name: reply_context(mail_id, replier)^
-- What a reply to :mail_id needs: its thread and subject, whether :replier sent or received
-- it, and the thread's other participants (senders and recipients, as sent: a purged copy
-- still counts) that are not retired.
SELECT m.thread_id, m.subject,
       (s.name = :replier OR :replier = ANY(m.recipients)) AS participant,
       ARRAY(SELECT i.name
             FROM identities AS i
             WHERE i.retired_at IS NULL AND i.name <> :replier
               AND (i.id IN (SELECT t.sender_id FROM mail AS t WHERE t.thread_id = m.thread_id)
                    OR i.name IN (SELECT unnest(t.recipients)
                                  FROM mail AS t WHERE t.thread_id = m.thread_id))
             ORDER BY i.name COLLATE "C") AS participants
FROM mail AS m
JOIN identities AS s ON s.id = m.sender_id
WHERE m.id = :mail_id;

-- name: inbox(identity, state, priority, before_id, limit)
-- An identity's mail, newest first. :state NULL shows unread, read and starred (passed snoozes
-- are unread); 'snoozed' shows sleeping snoozes only. Keyset pagination: ids < :before_id.
SELECT v.*, b.state, b.read_at, b.acked_at, b.snoozed_until
FROM mailbox AS b
JOIN mail_view AS v ON v.id = b.mail_id
WHERE b.identity_id = (SELECT id FROM identities WHERE name = :identity)
  AND CASE WHEN CAST(:state AS text) IS NULL THEN b.state IN ('unread', 'read', 'starred')
           ELSE b.state = :state END
  AND (CAST(:priority AS text) IS NULL OR v.priority = :priority)
  AND (CAST(:before_id AS bigint) IS NULL OR b.mail_id < :before_id)
ORDER BY b.mail_id DESC
LIMIT :limit;

-- name: read_mail(identity, mail_id)^
-- Open a mail: an unread one (or a passed snooze) becomes read; any other state stays. read_at
-- is set the first time. No row unless the identity received it.
WITH u AS (
    UPDATE mail_recipients AS r
    SET state = CASE WHEN b.state = 'unread' THEN 'read' ELSE r.state END,
        snoozed_until = b.snoozed_until,
        read_at = COALESCE(r.read_at, ikigai_now()),
        state_changed_at = CASE WHEN b.state = 'unread' THEN ikigai_now()
                                ELSE r.state_changed_at END
    FROM mailbox AS b
    WHERE b.identity_id = (SELECT id FROM identities WHERE name = :identity)
      AND b.mail_id = :mail_id
      AND r.identity_id = b.identity_id AND r.mail_id = b.mail_id
    RETURNING r.mail_id, r.state, r.read_at, r.acked_at, r.snoozed_until
)
SELECT v.*, u.state, u.read_at, u.acked_at, u.snoozed_until
FROM u JOIN mail_view AS v ON v.id = u.mail_id;

-- name: set_mail_state(identity, mail_id, state, from_states, snooze_at, snooze_for)^
-- The guarded transition: moves the recipient row to :state only from one of :from_states
-- (effective states; mail.py holds the table) and, for snoozed, only to a future time
-- (:snooze_at, or now + :snooze_for). No row: not a recipient, or not allowed now.
WITH u AS (
    UPDATE mail_recipients AS r
    SET state = :state,
        snoozed_until = CASE WHEN :state = 'snoozed'
                             THEN COALESCE(CAST(:snooze_at AS timestamptz),
                                           ikigai_now() + CAST(:snooze_for AS interval))
                        END,
        read_at = CASE WHEN :state = 'read' THEN COALESCE(r.read_at, ikigai_now())
                       ELSE r.read_at END,
        state_changed_at = ikigai_now()
    FROM mailbox AS b
    WHERE b.identity_id = (SELECT id FROM identities WHERE name = :identity)
      AND b.mail_id = :mail_id
      AND r.identity_id = b.identity_id AND r.mail_id = b.mail_id
      AND b.state = ANY(CAST(:from_states AS text[]))
      AND (:state <> 'snoozed'
           OR COALESCE(CAST(:snooze_at AS timestamptz),
                       ikigai_now() + CAST(:snooze_for AS interval)) > ikigai_now())
    RETURNING r.mail_id, r.state, r.read_at, r.acked_at, r.snoozed_until
)
SELECT v.*, u.state, u.read_at, u.acked_at, u.snoozed_until
FROM u JOIN mail_view AS v ON v.id = u.mail_id;

-- name: mailbox_entry(identity, mail_id)^
-- A recipient row's effective state (rare path: why a transition was refused). identity_id is
-- NULL when the identity does not exist; state NULL when it did not receive the mail.
SELECT i.id AS identity_id, b.state, ikigai_now() AS now
FROM (SELECT 1) AS one
LEFT JOIN identities AS i ON i.name = :identity
LEFT JOIN mailbox AS b ON b.identity_id = i.id AND b.mail_id = :mail_id;

-- name: ack_mail(identity, mail_id)^
-- Acknowledge: acked_at is set once; an unread mail (or passed snooze) becomes read. Idempotent.
WITH u AS (
    UPDATE mail_recipients AS r
    SET acked_at = COALESCE(r.acked_at, ikigai_now()),
        state = CASE WHEN b.state = 'unread' THEN 'read' ELSE r.state END,
        snoozed_until = b.snoozed_until,
        read_at = CASE WHEN b.state = 'unread' THEN COALESCE(r.read_at, ikigai_now())
                       ELSE r.read_at END,
        state_changed_at = CASE WHEN b.state = 'unread' THEN ikigai_now()
                                ELSE r.state_changed_at END
    FROM mailbox AS b
    WHERE b.identity_id = (SELECT id FROM identities WHERE name = :identity)
      AND b.mail_id = :mail_id
      AND r.identity_id = b.identity_id AND r.mail_id = b.mail_id
    RETURNING r.mail_id, r.state, r.read_at, r.acked_at, r.snoozed_until
)
SELECT v.*, u.state, u.read_at, u.acked_at, u.snoozed_until
FROM u JOIN mail_view AS v ON v.id = u.mail_id;

-- name: set_thread_state(identity, thread_id, state, from_states)!
-- The guarded transition for each of the identity's mails in a thread where it is allowed (one
-- statement).
UPDATE mail_recipients AS r
SET state = :state,
    snoozed_until = NULL,
    read_at = CASE WHEN :state = 'read' THEN COALESCE(r.read_at, ikigai_now())
                   ELSE r.read_at END,
    state_changed_at = ikigai_now()
FROM mailbox AS b
WHERE b.identity_id = (SELECT id FROM identities WHERE name = :identity)
  AND b.mail_id IN (SELECT id FROM mail WHERE thread_id = :thread_id)
  AND r.identity_id = b.identity_id AND r.mail_id = b.mail_id
  AND b.state = ANY(CAST(:from_states AS text[]));

-- name: thread_mail(thread_id, identity)
-- A thread's mails in id order; with :identity, only those it sent or was sent (even if it
-- has purged its copy since).
SELECT v.*
FROM mail_view AS v
WHERE v.thread_id = :thread_id
  AND (CAST(:identity AS text) IS NULL
       OR v.sender = :identity
       OR :identity = ANY(v.recipients))
ORDER BY v.id;

-- name: sent_mail(identity, limit)
-- What an identity sent, newest first, without the mails it deleted from this view.
SELECT v.*
FROM mail_view AS v
WHERE v.sender_id = (SELECT id FROM identities WHERE name = :identity)
  AND NOT v.deleted_by_sender
ORDER BY v.id DESC
LIMIT :limit;

-- name: delete_sent(identity, mail_id)^
-- Hide a mail from its sender's sent view (recipients keep it). No row unless it is theirs.
UPDATE mail SET deleted_by_sender = true
WHERE id = :mail_id AND sender_id = (SELECT id FROM identities WHERE name = :identity)
RETURNING id;

-- name: mail_counts(identity)^
-- An identity's mailbox counts in one statement (no row: no such identity).
SELECT count(*) FILTER (WHERE b.state = 'unread') AS unread,
       count(*) FILTER (WHERE b.state = 'unread' AND m.priority = 'urgent') AS urgent_unread,
       count(*) FILTER (WHERE b.state = 'starred') AS starred,
       count(*) FILTER (WHERE b.state = 'snoozed') AS snoozed,
       count(*) FILTER (WHERE b.state = 'archived') AS archived,
       count(*) FILTER (WHERE b.state = 'trash') AS trash
FROM identities AS i
LEFT JOIN mailbox AS b ON b.identity_id = i.id
LEFT JOIN mail AS m ON m.id = b.mail_id
WHERE i.name = :identity
GROUP BY i.id;

-- name: search_mail(query, ids, phrase_ids, by_rank, before_rank, before_id, limit)
-- The page of a mail search (queries/search.sql collects the candidates :ids, scoped to the
-- identity): ranked by ts_rank_cd over subject (weight A) and body (weight B) with length
-- normalisation, scaled into [0, 1), plus 1 for a member of :phrase_ids; best first and newest
-- on ties (:by_rank), else newest first; with :before_rank only those after (before_rank,
-- before_id). Snippets (subject, then body) for the page's rows only.
WITH q AS MATERIALIZED (
    SELECT websearch_to_tsquery('english', :query) AS tsq
), ranked AS (
    SELECT m.id,
           CAST(ts_rank_cd(m.search_vector, (SELECT tsq FROM q), 1 | 32) AS float8)
           + CASE WHEN m.id = ANY(CAST(:phrase_ids AS bigint[])) THEN 1 ELSE 0 END AS rank
    FROM mail AS m
    WHERE m.id = ANY(CAST(:ids AS bigint[]))
), page AS (
    SELECT ranked.id, ranked.rank
    FROM ranked
    WHERE CAST(:before_rank AS float8) IS NULL
       OR (ranked.rank, ranked.id) < (CAST(:before_rank AS float8), CAST(:before_id AS bigint))
    ORDER BY CASE WHEN CAST(:by_rank AS boolean) THEN ranked.rank ELSE 0 END DESC, ranked.id DESC
    LIMIT :limit
)
SELECT v.*, page.rank,
       ts_headline('english', v.subject || E'\n' || left(v.body, 100000), q.tsq,
                   'StartSel=[, StopSel=], MaxWords=30, MinWords=10, MaxFragments=2') AS snippet
FROM page
JOIN mail_view AS v ON v.id = page.id
CROSS JOIN q
ORDER BY CASE WHEN CAST(:by_rank AS boolean) THEN page.rank ELSE 0 END DESC, v.id DESC;

-- name: claim_unread(identity)^
-- For wait: the identity's oldest unread mail (or passed snooze), marked read. SKIP LOCKED: two
-- waiters never take the same row (the loser moves on to the next one, or finds none).
WITH c AS (
    SELECT r.identity_id, r.mail_id
    FROM mail_recipients AS r
    WHERE r.identity_id = (SELECT id FROM identities WHERE name = :identity)
      AND r.state IN ('unread', 'snoozed')
      AND (r.state = 'unread' OR r.snoozed_until <= ikigai_now())
    ORDER BY r.mail_id
    LIMIT 1
    FOR UPDATE OF r SKIP LOCKED
), u AS (
    UPDATE mail_recipients AS r
    SET state = 'read', snoozed_until = NULL, read_at = COALESCE(r.read_at, ikigai_now()),
        state_changed_at = ikigai_now()
    FROM c
    WHERE r.identity_id = c.identity_id AND r.mail_id = c.mail_id
    RETURNING r.mail_id, r.state, r.read_at, r.acked_at, r.snoozed_until
)
SELECT v.*, u.state, u.read_at, u.acked_at, u.snoozed_until
FROM u JOIN mail_view AS v ON v.id = u.mail_id;

-- name: wait_target(identity)^
-- For wait: the identity's id (the NOTIFY payload names it) and the seconds until its next
-- sleeping snooze wakes (NULL: none), by the database's clock.
SELECT i.id,
       EXTRACT(EPOCH FROM (SELECT min(r.snoozed_until) FROM mail_recipients AS r
                           WHERE r.identity_id = i.id AND r.state = 'snoozed')
                          - ikigai_now()) AS next_wake
FROM identities AS i
WHERE i.name = :identity;

-- name: mail_wait_start(identity)^
-- For wait: the identity's id (the NOTIFY payload names it), after reaping its dead waiters'
-- registrations (mail_waiters_reap, migration 0026: their hand-offs become unread again, so
-- this wait can get them). The reaper runs only when the identity has registrations.
SELECT i.id,
       CASE WHEN EXISTS (SELECT 1 FROM mail_waiters AS w WHERE w.identity_id = i.id)
            THEN mail_waiters_reap(i.id) ELSE 0 END AS reaped
FROM identities AS i
WHERE i.name = :identity;

-- name: mail_wait_register(waiter_id, identity_id, liveness, seconds)^
-- For wait: register waiter :waiter_id (an id the waiter chose, so that it can withdraw the
-- registration even when interrupted during this call) of :identity_id, which sends may hand
-- their mail to, alive while the lock :liveness is held and for :seconds plus a 10 s grace
-- (migration 0026). No row: the id is taken (pick another). Committed without waiting for the
-- WAL flush: losing it on a crash only means no hand-off to it (the crash also ends the
-- listener's lock, and the waiter registers again).
WITH cfg AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS v)
INSERT INTO mail_waiters (id, identity_id, liveness, expires_at)
SELECT :waiter_id, :identity_id, :liveness,
       ikigai_now() + make_interval(secs => CAST(:seconds AS float8) + 10)
FROM cfg
ON CONFLICT (id) DO NOTHING
RETURNING id;

-- name: mail_wait_take(waiter_id)^
-- For wait: the mail handed to waiter :waiter_id, with its recipient row; the registration
-- is deleted, which makes the mail this waiter's (the reaper can no longer undo it). No row:
-- nothing handed over yet, or the registration is gone (reaped). On the wake-up hot path:
-- mail_waiters_take (migration 0026), whose plan each connection keeps; it commits without
-- waiting for the WAL flush (the mail was marked read by the sender's durable commit; a lost
-- delete brings back a dead registration, which the reaper undoes: a re-delivery, never a
-- loss).
SELECT t.* FROM mail_waiters_take(CAST(:waiter_id AS bigint)) AS t;

-- name: mail_wait_confirm(waiter_ids)!
-- For the listener (notify.py), once it gave the waiters :waiter_ids the mail handed to them
-- (from the hand-off's payload): delete their registrations, which makes the mail theirs (the
-- reaper can no longer undo it). Only rows with a hand-off: the notification came after the
-- sender's commit, so this statement's snapshot sees it. Without the WAL flush, like
-- mail_wait_take: losing it on a crash brings back a dead registration, which the reaper
-- undoes (a re-delivery, never a loss).
WITH cfg AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS v)
DELETE FROM mail_waiters AS w
USING cfg
WHERE w.id = ANY(CAST(:waiter_ids AS bigint[])) AND w.handed_mail_id IS NOT NULL;

-- name: mail_wait_give_back(waiter_id, identity_id, mail_id, handed_at)^
-- For wait, interrupted (or having claimed another mail) after the listener gave it mail
-- :mail_id, handed over at :handed_at: delete the registration if the listener has not yet,
-- and make the mail unread again where it is still as the hand-off left it (read, not acked,
-- state_changed_at = :handed_at, like mail_waiters_drop). Durable: the registration may be
-- gone already, and nothing else would undo the hand-off. No row: the mail was not as left.
WITH gone AS (
    DELETE FROM mail_waiters WHERE id = :waiter_id
)
UPDATE mail_recipients AS r
SET state = 'unread', read_at = NULL, state_changed_at = ikigai_now()
WHERE r.identity_id = :identity_id AND r.mail_id = :mail_id
  AND r.state = 'read' AND r.acked_at IS NULL
  AND r.state_changed_at = CAST(:handed_at AS timestamptz)
RETURNING r.mail_id;

-- name: mail_wait_leave(waiter_id)^
-- For wait, at its timeout: delete the registration unless a mail was handed to it (a sender
-- holding it is waited for; its hand-off then keeps the row, for mail_wait_take, whose own
-- snapshot sees the mail). No row: not deleted (handed over, or reaped already). Without the
-- WAL flush: losing it brings back a registration that dies with the crash.
WITH cfg AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS v)
DELETE FROM mail_waiters AS w
USING cfg
WHERE w.id = :waiter_id AND w.handed_mail_id IS NULL
RETURNING w.id;

-- name: mail_wait_cancel(waiter_id)^
-- For wait, when it will not return a hand-off (interrupted, or it claimed another mail):
-- delete the registration; a mail handed to it becomes unread again (mail_waiters_drop,
-- migration 0026). A no-op if it was never committed (interrupted while registering). Without
-- the WAL flush: losing it brings back a dead registration, which
-- the reaper drops the same way.
WITH cfg AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS v)
SELECT mail_waiters_drop(ARRAY[CAST(:waiter_id AS bigint)]) AS dropped FROM cfg;

-- name: mail_waiters_reap_all()^
-- Reap every identity's dead waiter registrations (mail_waiters_reap, migration 0026).
SELECT mail_waiters_reap(NULL) AS reaped;

-- name: wake_snoozed()!
-- Materialise passed snoozes as unread (they already count as unread).
UPDATE mail_recipients
SET state = 'unread', snoozed_until = NULL, state_changed_at = ikigai_now()
WHERE state = 'snoozed' AND snoozed_until <= ikigai_now();

-- name: purge_trash(older_than)!
-- Delete recipient rows that have been in trash for longer than :older_than (strictly: a row
-- trashed exactly :older_than ago stays; with 0, a row trashed at this very instant stays).
DELETE FROM mail_recipients
WHERE state = 'trash' AND state_changed_at < ikigai_now() - CAST(:older_than AS interval);

-- name: listener_liveness(key)^
-- Take the session-level advisory lock :key on a store's LISTEN connection (notify.py): while
-- that connection lives, the mail_waiters rows naming :key are live (migration 0026). False:
-- someone holds it already (pick another key).
SELECT pg_try_advisory_lock(:key) AS locked;

-- name: listen_mail()!
-- Subscribe this connection to the channel migration 0007's trigger notifies (notify.py).
LISTEN ikigai_mail;

-- name: listen_queue()!
-- Subscribe this connection to the channel migration 0008's trigger notifies (notify.py).
LISTEN ikigai_queue;

-- name: listen_changes()!
-- Subscribe this connection to the channels migration 0017 notifies (notify.py).
LISTEN ikigai_task;
LISTEN ikigai_lease;
LISTEN ikigai_thread;
LISTEN ikigai_session;

-- name: wake_after_commit()^
-- Have this connection's wake-ups sent after the commit (migration 0032): every notification of
-- the library's writes is kept in the session setting ikigai.wakes, for send_wakes, and each
-- one kept raises a NOTICE that tells ops.py to send them; so notices reach the client (they
-- do unless client_min_messages was raised above notice). Run once on each pooled connection
-- (pool.py).
SELECT set_config('ikigai.wake_after_commit', 'on', false) AS wake,
       CASE WHEN current_setting('client_min_messages') IN ('warning', 'error')
            THEN set_config('client_min_messages', 'notice', false) END AS messages;

-- name: send_wakes()^
-- Send the wake-ups this connection kept (migration 0032's ikigai_send_wakes: in their order,
-- then forgotten); returns how many. Run by ops.py right after the commit of a waking write, in
-- a transaction of its own that writes nothing (PostgreSQL's NOTIFY lock is then held only
-- briefly), or inside store.transaction() just before its COMMIT.
SELECT ikigai_send_wakes() AS sent;
