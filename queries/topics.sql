-- Topics (migration 0008): broadcast logs read by offset, and queues whose messages are
-- claimed by one holder at a time under a lease. A publish commits its mail with a pending
-- topic_log row, without locking the topic; sequence_mail (migration 0028's
-- sequence_topic) then gives the topic's committed pending rows the next offsets under the
-- topic's sequencer lock: gapless and in commit order for every reader, which reads offsets from topic_log.

-- name: create_topic(name, kind, retention, max_attempts, searchable)^
-- Create a topic; no row when the name is taken.
INSERT INTO topics (name, kind, retention, max_attempts, searchable)
VALUES (:name, :kind, :retention, :max_attempts, :searchable)
ON CONFLICT (name) DO NOTHING
RETURNING id, name, kind, retention, max_attempts, searchable, created_at;

-- name: ensure_topic(name)!
-- Create a broadcast topic unless one of that name exists (subscribe's implicit create).
INSERT INTO topics (name) VALUES (:name) ON CONFLICT (name) DO NOTHING;

-- name: get_topic(name)^
-- One topic by name.
SELECT id, name, kind, retention, max_attempts, searchable, created_at FROM topics
WHERE name = :name;

-- name: list_topics()
-- Every topic with its subscriber count, retained message count (its topic_log rows, one per
-- mail, pending ones included: an index scan, where mail has no index on topic_id), last
-- offset and, for a queue, its open messages by state (queue_items_open_idx) and its dead
-- letters (queue_items_dead_idx), by name.
SELECT t.id, t.name, t.kind, t.retention, t.max_attempts, t.searchable, t.created_at,
       (SELECT count(*) FROM subscriptions AS s WHERE s.topic_id = t.id) AS subscribers,
       (SELECT count(*) FROM topic_log AS l WHERE l.topic_id = t.id) AS messages,
       t.next_offset - 1 AS last_offset,
       o.available, o.claimed,
       (SELECT count(*) FROM queue_items AS d
        WHERE d.topic_id = t.id AND d.outcome = 'dead') AS dead
FROM topics AS t
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE q.state = 'available') AS available,
           count(*) FILTER (WHERE q.state = 'claimed') AS claimed
    FROM queue_items AS q
    WHERE q.topic_id = t.id AND q.outcome IS NULL
) AS o
ORDER BY t.name;

-- name: delete_topic(name)^
-- Delete a topic and its log, unless it has unfinished queue work (available or claimed).
DELETE FROM topics AS t
WHERE t.name = :name
  AND NOT EXISTS (SELECT 1 FROM queue_items AS q
                  WHERE q.topic_id = t.id AND q.outcome IS NULL)  -- available or claimed
RETURNING t.id;

-- name: open_work(name)^
-- How much unfinished queue work a topic has (why delete_topic refused).
SELECT count(*) AS n
FROM queue_items AS q JOIN topics AS t ON t.id = q.topic_id
WHERE t.name = :name AND q.outcome IS NULL;  -- available or claimed: queue_items_open_idx

-- name: subscribe(identity, topic)^
-- Subscribe an identity that is not retired (idempotent); no row when it is missing or retired.
WITH me AS (
    SELECT id FROM identities WHERE name = :identity AND retired_at IS NULL
), t AS (
    SELECT id FROM topics WHERE name = :topic
), ins AS (
    INSERT INTO subscriptions (identity_id, topic_id)
    SELECT me.id, t.id FROM me, t
    ON CONFLICT DO NOTHING
)
SELECT me.id FROM me, t;

-- name: unsubscribe(identity, topic)!
-- Remove a subscription (idempotent); the stored offset stays for a later re-subscribe.
DELETE FROM subscriptions AS s
USING identities AS i, topics AS t
WHERE s.identity_id = i.id AND s.topic_id = t.id AND i.name = :identity AND t.name = :topic;

-- name: topic_subscribers(topic)
-- The identities subscribed to a topic, by name.
SELECT i.id, i.name, i.project_key, i.git_branch, i.purpose, i.working_dir, i.hostname,
       i.agent_uuid, i.created_at, i.last_active_at, i.retired_at,
       (SELECT p.name FROM identities AS p WHERE p.id = i.parent_id) AS parent
FROM subscriptions AS s
JOIN identities AS i ON i.id = s.identity_id
JOIN topics AS t ON t.id = s.topic_id
WHERE t.name = :topic
ORDER BY i.name;

-- name: identity_subscriptions(identity)
-- The topics an identity is subscribed to, by name.
SELECT t.id, t.name, t.kind, t.retention, t.max_attempts, t.searchable, t.created_at
FROM subscriptions AS s
JOIN topics AS t ON t.id = s.topic_id
JOIN identities AS i ON i.id = s.identity_id
WHERE i.name = :identity
ORDER BY t.name;

-- name: publish_mail(sender, topic, subject, body, priority, attachments, metadata, idempotency_key, request_hash, new_thread_id, delay)^
-- Append a mail to a topic in one statement: insert the mail and its topic_log row, and give
-- every current subscriber of a broadcast topic except the sender an unread copy, or create
-- the queue row of a queue topic. Its offset: when the topic's sequencer lock is free and no
-- pending mail of the topic is visible, this statement takes the lock (held to commit) and
-- gives the mail the next offset itself (one statement, as when no one else publishes);
-- otherwise the mail is pending (log_offset NULL: sequence_mail gives it, and the pending
-- mail before it, offsets after this commits), so publishes to one topic commit side by side
-- and a mail whose publisher died before sequencing gets its offset at the next publish (or
-- the next read that reaches the end of the log: sequence_pending). :delay (seconds, or NULL):
-- a queue message is claimable from then on (queue_items.available_at). No row: missing topic,
-- missing or retired sender, used key (which writes nothing, so it takes no offset), a delay
-- to a broadcast topic.
WITH t AS (
    SELECT id, kind FROM topics
    WHERE name = :topic AND (CAST(:delay AS double precision) IS NULL OR kind = 'queue')
), s AS (
    SELECT id FROM identities WHERE name = :sender AND retired_at IS NULL FOR SHARE
), subs AS (
    SELECT i.id, i.name
    FROM t, s, subscriptions AS sub, identities AS i
    WHERE t.kind = 'broadcast' AND sub.topic_id = t.id AND i.id = sub.identity_id
      AND i.retired_at IS NULL AND sub.identity_id <> s.id
), posted AS (
    -- The mail and the subscribers' copies (post_mail, migration 0016); read by m, which
    -- pending, queued and the main query read.
    SELECT post_mail(
               thread_id => :new_thread_id, sender_id => s.id,
               recipient_ids => ARRAY(SELECT subs.id FROM subs),
               recipients => ARRAY(SELECT subs.name FROM subs ORDER BY subs.name COLLATE "C"),
               subject => :subject, body => :body, priority => :priority,
               attachments => CAST(:attachments AS jsonb), metadata => CAST(:metadata AS jsonb),
               idempotency_key => :idempotency_key, request_hash => :request_hash,
               topic_id => t.id
           ) AS mail
    FROM t, s
), m AS (
    -- The mail written (none when the sender already used the key).
    SELECT (posted.mail).* FROM posted WHERE (posted.mail).id IS NOT NULL
), bump AS (
    -- The sequencer lock, if free (migration 0028's key): then this mail's offset is the
    -- topic's next. next_offset + 1 is computed on the newest row version (an UPDATE rereads
    -- a row changed since its snapshot), so it continues the last sequencer run's offsets.
    UPDATE topics AS u SET next_offset = u.next_offset + 1
    FROM t, m
    WHERE u.id = t.id
      -- Pending mail goes first: then this one waits too. The probe is an ordered LIMIT 1 on
      -- the columns of topic_log_pending_idx, so it scans that index whatever the statistics
      -- say (EXISTS let the planner scan the whole log once some topic had pending rows).
      AND CASE WHEN (SELECT p.mail_id FROM topic_log AS p
                     WHERE p.topic_id = t.id AND p.log_offset IS NULL
                     ORDER BY p.topic_id, p.mail_id LIMIT 1) IS NOT NULL
               THEN false
               ELSE pg_try_advisory_xact_lock(hashtextextended('topic-sequencer:' || t.id, 7))
          END
    RETURNING u.next_offset - 1 AS log_offset
), logged AS (
    INSERT INTO topic_log (mail_id, topic_id, log_offset)
    SELECT m.id, t.id, (SELECT bump.log_offset FROM bump) FROM m, t
), queued AS (
    -- The claim order's rank (migration 0048): urgent 0, normal 1, low 2.
    INSERT INTO queue_items (mail_id, topic_id, available_at, priority_rank)
    SELECT m.id, t.id, ikigai_now() + make_interval(secs => CAST(:delay AS double precision)),
           CASE m.priority WHEN 'urgent' THEN 0 WHEN 'low' THEN 2 ELSE 1 END
    FROM m, t WHERE t.kind = 'queue'
)
SELECT m.id, m.thread_id, m.parent_id, CAST(:sender AS text) AS sender, m.recipients,
       m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
       m.idempotency_key, m.deleted_by_sender, m.created_at,
       m.topic_id, CAST(:topic AS text) AS topic, (SELECT bump.log_offset FROM bump) AS log_offset
FROM m;

-- name: publish_mails(sender, topic, subjects, bodies, priorities, attachments, metadata, request_hashes, new_thread_ids, delay, idempotency_key)
-- Append a batch of mails to a topic in one statement (as publish_mail, one mail per element
-- of the arrays, which have one length; mail ids follow the arrays' order): with the
-- sequencer lock when it is free, at the next offsets in id order; else pending. No row:
-- missing topic, missing or retired sender, a delay (as publish_mail's) to a broadcast topic,
-- or :idempotency_key (on the first mail) already held by the sender's mail. One call of
-- post_mail's batch overload (migration 0051's, keyed) writes every mail and copy (one INSERT
-- a table, not a call a mail: a quarter less CPU a message).
WITH t AS (
    SELECT id, kind FROM topics
    WHERE name = :topic AND (CAST(:delay AS double precision) IS NULL OR kind = 'queue')
), s AS (
    SELECT id FROM identities WHERE name = :sender AND retired_at IS NULL FOR SHARE
), subs AS (
    SELECT i.id, i.name
    FROM t, s, subscriptions AS sub, identities AS i
    WHERE t.kind = 'broadcast' AND sub.topic_id = t.id AND i.id = sub.identity_id
      AND i.retired_at IS NULL AND sub.identity_id <> s.id
), r AS (
    SELECT ARRAY(SELECT subs.id FROM subs) AS ids,
           ARRAY(SELECT subs.name FROM subs ORDER BY subs.name COLLATE "C") AS names
), m AS (
    -- The mails and the subscribers' copies: post_mail's batch overload (migration 0039),
    -- ids in the arrays' order.
    SELECT p.*
    FROM t, s, r,
         post_mail(thread_ids => CAST(:new_thread_ids AS text[]), sender_id => s.id,
                   recipient_ids => r.ids, recipients => r.names,
                   subjects => CAST(:subjects AS text[]), bodies => CAST(:bodies AS text[]),
                   priorities => CAST(:priorities AS text[]),
                   attachments => CAST(:attachments AS jsonb[]),
                   metadata => CAST(:metadata AS jsonb[]),
                   request_hashes => CAST(:request_hashes AS text[]), topic_id => t.id,
                   idempotency_key => CAST(:idempotency_key AS text)) AS p
), bump AS (
    UPDATE topics AS u SET next_offset = u.next_offset + (SELECT count(*) FROM m)
    FROM t
    WHERE u.id = t.id AND EXISTS (SELECT 1 FROM m)
      AND CASE WHEN (SELECT p.mail_id FROM topic_log AS p  -- the probe of publish_mail
                     WHERE p.topic_id = t.id AND p.log_offset IS NULL
                     ORDER BY p.topic_id, p.mail_id LIMIT 1) IS NOT NULL
               THEN false
               ELSE pg_try_advisory_xact_lock(hashtextextended('topic-sequencer:' || t.id, 7))
          END
    RETURNING u.next_offset - (SELECT count(*) FROM m) AS first
), o AS (
    SELECT m.id, (SELECT bump.first FROM bump) - 1 + row_number() OVER (ORDER BY m.id) AS off
    FROM m
), logged AS (
    INSERT INTO topic_log (mail_id, topic_id, log_offset)
    SELECT o.id, t.id, o.off FROM o, t
), queued AS (
    -- The claim order's rank (migration 0048): urgent 0, normal 1, low 2.
    INSERT INTO queue_items (mail_id, topic_id, available_at, priority_rank)
    SELECT m.id, t.id, ikigai_now() + make_interval(secs => CAST(:delay AS double precision)),
           CASE m.priority WHEN 'urgent' THEN 0 WHEN 'low' THEN 2 ELSE 1 END
    FROM m, t WHERE t.kind = 'queue'
)
SELECT m.id, m.thread_id, m.parent_id, CAST(:sender AS text) AS sender, m.recipients,
       m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
       m.idempotency_key, m.deleted_by_sender, m.created_at,
       m.topic_id, CAST(:topic AS text) AS topic, o.off AS log_offset
FROM m JOIN o ON o.id = m.id
ORDER BY m.id;

-- name: published_batch(sender, idempotency_key, thread_ids)
-- The batch a sender published with an idempotency key (publish_many): the mail holding the
-- key, then, for each later thread id of :thread_ids (the library derives them from the
-- sender, key and position), the sender's first mail from the keyed one on that thread; as
-- mail_view rows in the order of :thread_ids, each with the keyed mail's request hash
-- (batch_hash) and its position (n, from 1). Mails deleted since (retention) are missing; no
-- row when no mail of the sender holds the key.
SELECT v.*, f.request_hash AS batch_hash, b.n
FROM identities AS s
JOIN mail AS f ON f.sender_id = s.id AND f.idempotency_key = :idempotency_key
CROSS JOIN LATERAL (
    SELECT DISTINCT ON (t.n) m.id, t.n
    FROM unnest(CAST(:thread_ids AS text[])) WITH ORDINALITY AS t (thread_id, n)
    JOIN mail AS m ON m.thread_id = t.thread_id AND m.sender_id = s.id AND m.id >= f.id
    ORDER BY t.n, m.id
) AS b
JOIN mail_view AS v ON v.id = b.id
WHERE s.name = :sender
ORDER BY b.n;

-- name: sequence_mail(topic_id, mail_ids)
-- Sequence the topic (migration 0028's sequence_topic: every committed pending row gets the
-- next offset, under the topic's sequencer lock, held to this statement's commit) and return the
-- offsets of :mail_ids, by mail id. Run by the publisher after its publish committed; rows
-- already sequenced (by a publisher that got the lock first) are read without the lock.
SELECT mail_id, log_offset FROM sequence_topic(:topic_id, CAST(:mail_ids AS bigint[]));

-- name: sequence_pending(topic)^
-- For a reader at the end of a topic's log: when the topic has committed mail still without an
-- offset (its publisher died, or has not run the sequencer yet, between its commit and
-- sequence_mail), sequence the topic (migration 0028's sequence_topic) and say so: true means
-- the log grew and the reader reads again. An index probe when nothing is pending.
SELECT count(*) > 0 AS sequenced
FROM topics AS t
CROSS JOIN LATERAL (SELECT count(*) FROM sequence_topic(t.id, ARRAY[]::bigint[])) AS s
WHERE t.name = :topic
  AND (SELECT l.mail_id FROM topic_log AS l  -- the probe of publish_mail
       WHERE l.topic_id = t.id AND l.log_offset IS NULL
       ORDER BY l.topic_id, l.mail_id LIMIT 1) IS NOT NULL;

-- name: publish_refusal(sender, topic)^
-- Why publish_mail wrote nothing, besides a used key (rare path): the sender's state and the
-- topic's kind (NULL: no such topic).
SELECT (SELECT CASE WHEN retired_at IS NULL THEN 'active' ELSE 'retired' END
        FROM identities WHERE name = :sender) AS sender_state,
       (SELECT kind FROM topics WHERE name = :topic) AS topic_kind;

-- name: read_topic(topic, after, limit)
-- A topic's log after offset :after, in offset order (sequenced rows only: topic_log).
SELECT v.*
FROM topic_log AS l
JOIN mail_view AS v ON v.id = l.mail_id
WHERE l.topic_id = (SELECT id FROM topics WHERE name = :topic)
  AND l.log_offset > :after
ORDER BY l.log_offset
LIMIT :limit;

-- name: commit_offset(identity, topic, offset)^
-- Advance the identity's stored offset of a topic, monotonically (a smaller commit never moves
-- it back), and never past the topic's last offset. No row: missing identity or topic, or an
-- offset past the end.
INSERT INTO consumer_offsets AS o (identity_id, topic_id, last_offset)
SELECT i.id, t.id, :offset
FROM identities AS i, topics AS t
WHERE i.name = :identity AND t.name = :topic AND :offset < t.next_offset
ON CONFLICT (identity_id, topic_id) DO UPDATE
SET last_offset = GREATEST(o.last_offset, EXCLUDED.last_offset), updated_at = ikigai_now()
RETURNING last_offset;

-- name: stored_offset(identity, topic)^
-- The identity's stored offset of a topic (0 when none), with the topic's last offset; no row
-- when the identity or the topic does not exist.
SELECT COALESCE(o.last_offset, 0) AS last_offset, t.next_offset - 1 AS topic_last
FROM identities AS i
CROSS JOIN topics AS t
LEFT JOIN consumer_offsets AS o ON o.identity_id = i.id AND o.topic_id = t.id
WHERE i.name = :identity AND t.name = :topic;

-- name: poll(identity, limit)
-- In one statement: the identity's unread inbox (newest first, at most :limit) and, for each
-- subscribed broadcast topic, its stored offset and up to :limit mails after it (offset
-- order). part = 'inbox' or 'topic'; a topic with nothing new gives one row with a NULL id.
WITH me AS (
    SELECT id FROM identities WHERE name = :identity
), inbox AS (
    SELECT 'inbox' AS part, CAST(NULL AS text) AS topic_name, CAST(NULL AS bigint) AS stored,
           v.*, b.state, b.read_at, b.acked_at, b.snoozed_until
    FROM mailbox AS b
    JOIN mail_view AS v ON v.id = b.mail_id
    WHERE b.identity_id = (SELECT id FROM me) AND b.state = 'unread'
    ORDER BY b.mail_id DESC
    LIMIT :limit
), subs AS (
    SELECT t.id, t.name, COALESCE(o.last_offset, 0) AS stored
    FROM subscriptions AS s
    JOIN topics AS t ON t.id = s.topic_id
    LEFT JOIN consumer_offsets AS o ON o.identity_id = s.identity_id AND o.topic_id = t.id
    WHERE s.identity_id = (SELECT id FROM me) AND t.kind = 'broadcast'
), news AS (
    SELECT 'topic' AS part, subs.name AS topic_name, subs.stored,
           v.*, CAST(NULL AS text) AS state, CAST(NULL AS timestamptz) AS read_at,
           CAST(NULL AS timestamptz) AS acked_at, CAST(NULL AS timestamptz) AS snoozed_until
    FROM subs
    LEFT JOIN LATERAL (
        SELECT w.* FROM topic_log AS l JOIN mail_view AS w ON w.id = l.mail_id
        WHERE l.topic_id = subs.id AND l.log_offset > subs.stored
        ORDER BY l.log_offset
        LIMIT :limit
    ) AS v ON true
)
SELECT * FROM (SELECT * FROM inbox ORDER BY id DESC) AS a
UNION ALL
SELECT * FROM (SELECT * FROM news ORDER BY topic_name, log_offset) AS b;

-- name: claim_queue_item(identity, topic, lease, done_id, done_token)
-- Claim the first claimable message of a queue topic the identity subscribes to, the most
-- urgent first and within a priority the oldest (priority_rank, mail_id: migration 0048):
-- available (and due: available_at passed or NULL, migration 0047), or claimed under a lease
-- that expired; with a new token and a lease of :lease seconds.
-- SKIP LOCKED: racing claimers take different rows. An expired lease that used its last
-- attempt, met first, becomes a dead letter instead (the caller claims again: that claim's
-- walk goes past it). With :done_id/:done_token, that claim is completed first, in the same
-- statement (a worker's loop is one round trip per message), and nothing is claimed unless
-- it was (its lease was lost, or this claim is refused, which then completes nothing).
-- One row per queue row written, act saying what became of it: 'done' (the claim completed),
-- 'claimed' (with its mail and the new claim) or 'dead'. No row: nothing completed (when
-- :done_id is given) and nothing claimed: nothing to claim, or not subscribed, not a queue,
-- missing or retired identity (topics.py explains).
-- One UPDATE writes both rows (one result relation to set up, not two); a claim changes no
-- indexed column (migration 0025): it is a HOT update.
WITH t AS (
    -- The topic, if the identity (not retired) subscribes to it and it is a queue.
    SELECT t.id, t.max_attempts, i.id AS holder_id
    FROM identities AS i
    JOIN subscriptions AS s ON s.identity_id = i.id
    JOIN topics AS t ON t.id = s.topic_id
    WHERE i.name = :identity AND i.retired_at IS NULL AND t.name = :topic AND t.kind = 'queue'
), held AS (
    -- The claim to complete, locked: a concurrent claim that took over its expired lease
    -- changed the token, and the lock's recheck of the newest row version then drops it, so
    -- the UPDATE below completes exactly what is held here. A row with a token is claimed
    -- (queue_items_lease_check), so no state test: one would match no index predicate
    -- better than the primary key, and could only mislead the planner.
    SELECT q.mail_id
    FROM queue_items AS q
    WHERE q.mail_id = CAST(:done_id AS bigint) AND q.token = CAST(:done_token AS uuid)
      AND EXISTS (SELECT 1 FROM t)
    FOR UPDATE
), c AS (
    -- Ordered by (topic_id, priority_rank, mail_id), which only queue_items_open_idx gives, so
    -- the planner walks it and stops at the first claimable row (done and dead rows are not
    -- in that index). Ordered by mail_id alone, or with topic_id = a scalar (which makes
    -- topic_id a constant and drops it from the order), the primary key gave the order too
    -- (before 0048), and the planner, whose statistics may date from a fresh backlog, picked
    -- it: each claim then read every done row of the queue's history (O(N^2) to drain N).
    -- = ANY (ARRAY[...]) is one value. The row being completed is still open in this statement's snapshot: skip it.
    -- settle: an expired lease on its last attempt, which becomes a dead letter.
    SELECT q.mail_id,
           q.state = 'claimed' AND q.attempts >= (SELECT max_attempts FROM t) AS settle
    FROM queue_items AS q
    WHERE q.topic_id = ANY (ARRAY[(SELECT id FROM t
                                   WHERE CAST(:done_id AS bigint) IS NULL
                                      OR EXISTS (SELECT 1 FROM held))])
      AND q.outcome IS NULL
      AND ((q.state = 'available'
            AND (q.available_at IS NULL OR q.available_at <= ikigai_now()))
           OR q.lease_until <= ikigai_now())
      AND q.mail_id IS DISTINCT FROM CAST(:done_id AS bigint)
    ORDER BY q.topic_id, q.priority_rank, q.mail_id
    LIMIT 1
    FOR UPDATE OF q SKIP LOCKED
), w AS (
    SELECT mail_id, 'done' AS act FROM held
    UNION ALL
    SELECT mail_id, CASE WHEN settle THEN 'dead' ELSE 'claimed' END FROM c
)
UPDATE queue_items AS q
SET state = w.act,
    attempts = CASE WHEN w.act = 'claimed' THEN q.attempts + 1 ELSE q.attempts END,
    holder_id = CASE w.act WHEN 'claimed' THEN (SELECT holder_id FROM t)
                           WHEN 'dead' THEN NULL
                           ELSE q.holder_id END,
    token = CASE WHEN w.act = 'claimed' THEN gen_random_uuid() END,
    lease_until = CASE WHEN w.act = 'claimed'
                       THEN ikigai_now() + make_interval(secs => :lease) END,
    -- A claimed row taken over or settled here had an expired lease.
    last_error = CASE WHEN w.act <> 'done' AND q.state = 'claimed' THEN 'lease expired'
                      ELSE q.last_error END,
    updated_at = ikigai_now()
FROM w
JOIN mail AS m ON m.id = w.mail_id
JOIN identities AS s ON s.id = m.sender_id
WHERE q.mail_id = w.mail_id
RETURNING w.act,
          m.id, m.thread_id, m.parent_id, m.sender_id, s.name AS sender, m.recipients,
          m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
          m.idempotency_key, m.deleted_by_sender, m.created_at,
          m.topic_id, CAST(:topic AS text) AS topic,
          (SELECT l.log_offset FROM topic_log AS l WHERE l.mail_id = m.id) AS log_offset,
          q.attempts, q.lease_until, CAST(q.token AS text) AS token;

-- name: queue_listen(topic_ids, seconds, patience)^
-- A blocking claim is about to sleep on a topic (after its LISTEN, before its last look), or a
-- web page shows topics: have the publishes to :topic_ids of the next :seconds notify
-- (migration 0050: a queue publish notifies only topics someone listens to). Each waits up to
-- :patience seconds for the publishes in flight to its topic to commit, so that a last look
-- finds them; how many topics were registered (the others: not within :patience).
SELECT count(*) FILTER (WHERE ikigai_queue_listen(t.id, CAST(:seconds AS double precision),
                                                  CAST(:patience AS double precision)))
       AS registered
FROM unnest(CAST(:topic_ids AS bigint[])) AS t (id);

-- name: claim_refusal(identity, topic)^
-- Why claim_queue_item found nothing (identity, topic, kind, subscription) and, when it could
-- claim, the seconds until the topic's next lease expires or its next delayed message is due
-- (NULL: none), for a blocking claim.
-- The claimed rows are read through queue_items_open_idx (the topic's open rows: when a claim
-- found nothing to claim, its live leases and the rows racing claimers hold).
SELECT (SELECT CASE WHEN retired_at IS NULL THEN 'active' ELSE 'retired' END
        FROM identities WHERE name = :identity) AS identity_state,
       t.id AS topic_id, t.kind,
       EXISTS (SELECT 1 FROM subscriptions AS s JOIN identities AS i ON i.id = s.identity_id
               WHERE s.topic_id = t.id AND i.name = :identity) AS subscribed,
       EXTRACT(EPOCH FROM (SELECT LEAST(min(q.lease_until) FILTER (WHERE q.state = 'claimed'),
                                        min(q.available_at)
                                            FILTER (WHERE q.state = 'available'
                                                      AND q.available_at > ikigai_now()))
                           FROM queue_items AS q
                           WHERE q.topic_id = t.id AND q.outcome IS NULL)
                          - ikigai_now()) AS next_expiry
FROM (SELECT 1) AS one
LEFT JOIN topics AS t ON t.name = :topic;

-- name: complete_claim(mail_id, token)^
-- Finish claimed work: only with the token of the current claim (a holder whose lease was
-- taken over by someone else holds a stale token). Only a claimed row has a token
-- (queue_items_lease_check): no state test, which could lead the planner to
-- queue_items_lease_idx instead of the primary key (see claim_queue_item).
UPDATE queue_items
SET state = 'done', token = NULL, lease_until = NULL, updated_at = ikigai_now()
WHERE mail_id = :mail_id AND token = CAST(:token AS uuid)
RETURNING mail_id;

-- name: release_claim(mail_id, token, error, delay)^
-- Give claimed work back: available again (claimable once :delay seconds passed, if given), or
-- a dead letter when it used its last attempt.
-- Available again notifies ikigai_queue (payload: the topic id) on commit, so blocked
-- claimers wake (migration 0025: this statement and requeue notify, no trigger does).
WITH r AS (
    UPDATE queue_items AS q
    SET state = CASE WHEN q.attempts >= t.max_attempts THEN 'dead' ELSE 'available' END,
        token = NULL, lease_until = NULL, holder_id = NULL, last_error = :error,
        available_at = CASE WHEN q.attempts < t.max_attempts
                            THEN ikigai_now()
                                 + make_interval(secs => CAST(:delay AS double precision)) END,
        updated_at = ikigai_now()
    FROM topics AS t
    WHERE q.mail_id = :mail_id AND q.token = CAST(:token AS uuid)  -- claimed: it has a token
      AND t.id = q.topic_id
    RETURNING q.state, q.topic_id
)
SELECT state
FROM r
WHERE CASE WHEN state = 'available'  -- CASE: no notification for a dead letter
           THEN ikigai_notify('ikigai_queue', CAST(topic_id AS text)) IS NOT NULL
           ELSE true END;

-- name: extend_claim(mail_id, token, lease)^
-- Move a claim's lease to now + :lease seconds, only with the current token; returns the claim.
WITH u AS (
    UPDATE queue_items
    SET lease_until = ikigai_now() + make_interval(secs => :lease), updated_at = ikigai_now()
    WHERE mail_id = :mail_id AND token = CAST(:token AS uuid)  -- claimed: it has a token
    RETURNING mail_id, attempts, lease_until, token
)
SELECT v.*, u.attempts, u.lease_until, CAST(u.token AS text) AS token
FROM u JOIN mail_view AS v ON v.id = u.mail_id;

-- name: dead_letters(topic)
-- A queue topic's dead letters, oldest first, with their attempts and last error.
SELECT v.*, q.attempts, q.last_error
FROM queue_items AS q
JOIN mail_view AS v ON v.id = q.mail_id
WHERE q.topic_id = (SELECT id FROM topics WHERE name = :topic)
  AND q.outcome = 'dead'  -- state = 'dead', as queue_items_dead_idx reads it
ORDER BY q.mail_id;

-- name: requeue(mail_id)^
-- Make a dead letter claimable again, with its attempts reset; notifies ikigai_queue (payload:
-- the topic id) on commit, as release_claim does.
WITH r AS (
    UPDATE queue_items
    SET state = 'available', attempts = 0, available_at = NULL, updated_at = ikigai_now()
    WHERE mail_id = :mail_id AND state = 'dead'
    RETURNING mail_id, topic_id
)
SELECT mail_id FROM r WHERE ikigai_notify('ikigai_queue', CAST(topic_id AS text)) IS NOT NULL;

-- name: queue_item_state(mail_id)^
-- Why requeue found no dead letter (rare path): the queue row's state (NULL: the mail is not
-- a queue message) and whether the mail exists.
SELECT (SELECT state FROM queue_items WHERE mail_id = :mail_id) AS state,
       EXISTS (SELECT 1 FROM mail WHERE id = :mail_id) AS mail_exists;

-- name: apply_retention(older_than)
-- Delete topic mail older than its topic's retention (or than :older_than when given), except unfinished queue work (available,
-- claimed or dead) and broadcast mail some subscriber has not passed by its stored offset
-- (a subscriber without one is at 0), and mail not sequenced yet. Direct mail is never
-- touched. One row per topic.
WITH gone AS (
    DELETE FROM mail AS m
    USING topics AS t, topic_log AS l
    WHERE m.topic_id = t.id
      AND l.mail_id = m.id AND l.log_offset IS NOT NULL  -- never a mail still pending
      AND m.created_at < ikigai_now() - COALESCE(:older_than::interval, t.retention)
      AND NOT EXISTS (SELECT 1 FROM queue_items AS q
                      WHERE q.mail_id = m.id AND q.state <> 'done')
      AND NOT (t.kind = 'broadcast' AND EXISTS (
          SELECT 1 FROM subscriptions AS s
          LEFT JOIN consumer_offsets AS o
                 ON o.identity_id = s.identity_id AND o.topic_id = s.topic_id
          WHERE s.topic_id = t.id AND COALESCE(o.last_offset, 0) < l.log_offset))
    RETURNING m.topic_id
)
SELECT t.name, count(gone.topic_id) AS deleted
FROM topics AS t
LEFT JOIN gone ON gone.topic_id = t.id
GROUP BY t.name
ORDER BY t.name;
