-- A queue publish wakes claimers only while someone waits on its topic (issue 38). Every new
-- available queue row notified ikigai_queue; through the library that is a second round trip
-- after the publish's commit (ikigai_send_wakes, migration 0032), a transaction of its own
-- that takes PostgreSQL's database-wide NOTIFY lock. Nobody listens to a queue whose workers
-- are busy claiming, so it was paid for nothing: 4 and 16 producers publishing to a queue
-- nobody waited on moved 1.27x and 1.30x the messages without it (same run).
-- - topics.listened_until: until when a blocking claim (or a web page) may be waiting on the
--   topic's wake-ups (NULL: never). ikigai_queue_listen(topic, seconds, patience) pushes it to
--   at least ikigai_now() + seconds; a waiter calls it after it LISTENs and before it looks
--   for work one last time, then sleeps.
-- - queue_notify_available(), 0008's statement trigger on inserted queue rows, notifies only
--   the topics whose listened_until is after ikigai_now(), read by a statement of its own (so
--   with a snapshot taken after the rows were written). In a REPEATABLE READ or SERIALIZABLE
--   transaction, whose snapshot is older, it notifies every topic, as before.
-- - No wake-up is lost: every writer of a queue row holds a KEY SHARE lock on its topic's row
--   until it commits (queue_items' foreign key to topics, and mail's). ikigai_queue_listen
--   locks that row FOR UPDATE before it moves listened_until, so it waits for every publish in
--   flight (their commits come before the waiter's last look), and a publish that comes later
--   waits for the registration's commit, then reads it in its trigger. When listened_until
--   already covers the requested time, the registration that set it did that.
-- - patience (seconds): how long the registration may wait for publishes in flight (a
--   transaction that published and has not committed); past it the function returns false
--   and registers nothing: the waiter's deadline has come (topics.claim then looks once more
--   and returns).
-- Releases, requeues and expired leases taken over notify as before (rare, always).
-- Idempotent.
-- depends: 0049-post-mail-without-recipients

ALTER TABLE topics ADD COLUMN IF NOT EXISTS listened_until TIMESTAMPTZ;

CREATE OR REPLACE FUNCTION ikigai_queue_listen(topic BIGINT, seconds DOUBLE PRECISION,
                                               patience DOUBLE PRECISION)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    until TIMESTAMPTZ := ikigai_now() + make_interval(secs => seconds);
    timeout TEXT := current_setting('lock_timeout');
BEGIN
    IF EXISTS (SELECT 1 FROM topics AS t WHERE t.id = topic AND t.listened_until >= until) THEN
        RETURN true;
    END IF;
    PERFORM set_config('lock_timeout',
                       CAST(GREATEST(1, ceil(patience * 1000)) AS bigint) || 'ms', true);
    BEGIN
        PERFORM 1 FROM topics AS t WHERE t.id = topic FOR UPDATE;
    EXCEPTION WHEN lock_not_available THEN
        PERFORM set_config('lock_timeout', timeout, true);
        RETURN false;
    END;
    PERFORM set_config('lock_timeout', timeout, true);
    UPDATE topics AS t SET listened_until = until
    WHERE t.id = topic AND (t.listened_until IS NULL OR t.listened_until < until);
    RETURN true;
END
$fn$;

-- 0032's, for the topics someone listens to (or every topic, in an older snapshot).
CREATE OR REPLACE FUNCTION queue_notify_available() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF current_setting('transaction_isolation') = 'read committed' THEN
        PERFORM ikigai_notify_ids('ikigai_queue',
                                  (SELECT string_agg(DISTINCT CAST(c.topic_id AS text), ',')
                                   FROM changed AS c JOIN topics AS t ON t.id = c.topic_id
                                   WHERE c.state = 'available'
                                     AND t.listened_until > ikigai_now()));
    ELSE
        PERFORM ikigai_notify_ids('ikigai_queue',
                                  (SELECT string_agg(DISTINCT CAST(topic_id AS text), ',')
                                   FROM changed WHERE state = 'available'));
    END IF;
    RETURN NULL;
END
$fn$;

UPDATE schema_metadata SET schema_version = 50 WHERE schema_version < 50;
