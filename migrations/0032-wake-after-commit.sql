-- Wake-ups after the commit (NOTIFY serialises commits). PostgreSQL's PreCommit_Notify takes a
-- database-wide lock that the committing transaction holds across its WAL flush, so every
-- transaction that issued NOTIFY commits one at a time, database wide (docs/project/
-- benchmarks.md: on a server whose durable commit takes a few ms, at most about one per flush).
-- A transaction that writes nothing (no transaction id: pg_notify and reads only) writes no
-- commit record and holds that lock only briefly.
--
-- - ikigai_notify(channel, payload) is where every notification of the library's writes now
--   goes (the triggers, the appends, the queue's inline notifications, the mail hand-off):
--   it calls pg_notify as before, unless the connection's session setting
--   ikigai.wake_after_commit is 'on'. Then it adds (channel, payload) to the session setting
--   ikigai.wakes instead (once: an equal pair already there is not added again). A setting
--   is transactional: what a rolled-back transaction or savepoint added is gone with it.
--   Each pair it keeps raises the NOTICE 'ikigai: wake-ups kept until after the commit', which
--   tells the client that it has wake-ups to send.
-- - ikigai_send_wakes() sends what ikigai.wakes holds, in the order it was added, and empties
--   it; it returns how many notifications it sent. The library's connections set
--   ikigai.wake_after_commit to 'on' and, when told by the NOTICE, run it right after the
--   statement's commit as a statement (and transaction) of its own (ikigai_store/ops.py; sent
--   in the same round trip for the writes that always wake: a send, a publish), or, inside the
--   caller's transaction (store.transaction()), just before its COMMIT, so that they are
--   delivered on commit as PostgreSQL delivers any NOTIFY.
-- - Every other writer (raw SQL, other languages, psql) does not set the setting: the triggers
--   notify in its transaction as before.
-- ikigai_notify_ids (0017) keeps its meaning (payload '*' over 7000 characters) through
-- ikigai_notify, so the triggers calling it (mail_notify_insert, task_notify, sequence_topic)
-- are unchanged; queue_notify_available (0008), mail_notify_unread_row (0023) and
-- ikigai_append (0030) called pg_notify themselves and are redefined here to call ikigai_notify.
-- Trade-off: a client that dies between its commit and ikigai_send_wakes() loses the wake-up
-- (its connection and so the setting are gone), never the data; every waiter looks again at
-- its deadline or when its listener reconnects (docs/concepts/coordination.md).
-- Idempotent.
-- depends: 0031-lease-clock

-- Notify channel with payload now, or after the commit when this connection asked for that.
CREATE OR REPLACE FUNCTION ikigai_notify(channel TEXT, payload TEXT) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    line TEXT := channel || ' ' || COALESCE(payload, '') || E'\n';
    pending TEXT;
BEGIN
    IF current_setting('ikigai.wake_after_commit', true) IS DISTINCT FROM 'on' THEN
        PERFORM pg_notify(channel, payload);
        RETURN;
    END IF;
    pending := COALESCE(current_setting('ikigai.wakes', true), '');
    IF strpos(E'\n' || pending, E'\n' || line) = 0 THEN
        PERFORM set_config('ikigai.wakes', pending || line, false);
        -- Tells the client it has wake-ups to send after the commit (ops.py's notice handler).
        RAISE NOTICE 'ikigai: wake-ups kept until after the commit';
    END IF;
END
$fn$;

-- 0017's, through ikigai_notify: ids (comma-separated), or '*' when too long for a payload.
CREATE OR REPLACE FUNCTION ikigai_notify_ids(channel TEXT, ids TEXT) RETURNS void
LANGUAGE sql VOLATILE
AS $fn$
    SELECT ikigai_notify(channel, CASE WHEN length(ids) > 7000 THEN '*' ELSE ids END)
    WHERE ids IS NOT NULL
$fn$;

-- Send the wake-ups this connection deferred (in their order) and forget them; how many.
CREATE OR REPLACE FUNCTION ikigai_send_wakes() RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    pending TEXT := current_setting('ikigai.wakes', true);
    line TEXT;
    n INTEGER := 0;
BEGIN
    IF pending IS NULL OR pending = '' THEN
        RETURN 0;
    END IF;
    PERFORM set_config('ikigai.wakes', '', false);
    FOR line IN SELECT l FROM unnest(string_to_array(rtrim(pending, E'\n'), E'\n'))
                          WITH ORDINALITY AS u(l, i) ORDER BY i LOOP
        PERFORM pg_notify(split_part(line, ' ', 1), substr(line, strpos(line, ' ') + 1));
        n := n + 1;
    END LOOP;
    RETURN n;
END
$fn$;

-- 0008's: new available queue rows notify their topics.
CREATE OR REPLACE FUNCTION queue_notify_available() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM ikigai_notify_ids('ikigai_queue',
                              (SELECT string_agg(DISTINCT topic_id::text, ',')
                               FROM changed WHERE state = 'available'));
    RETURN NULL;
END
$fn$;

-- 0023's: a recipient row an UPDATE makes unread notifies its identity.
CREATE OR REPLACE FUNCTION mail_notify_unread_row() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM ikigai_notify('ikigai_mail', NEW.identity_id::text);
    RETURN NULL;
END
$fn$;

-- 0030's append, its wake-up through ikigai_notify.
CREATE OR REPLACE FUNCTION ikigai_append(sid BIGINT, agent TEXT, ev_kind TEXT, ev_content TEXT,
                                         ev_data JSONB, target BIGINT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    listened TIMESTAMPTZ;
BEGIN
    SELECT s.listened_until INTO listened
    FROM sessions AS s WHERE s.id = sid AND s.ended_at IS NULL
    FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF agent IS NOT NULL THEN
        PERFORM 1 FROM agents AS a
        WHERE a.uuid = agent AND a.session_id = sid AND a.status = 'running'
        FOR SHARE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF target IS NOT NULL THEN
        PERFORM 1 FROM messages AS m
        WHERE m.session_id = sid AND m.id = target
          AND CASE WHEN ev_kind = 'rewind' THEN m.kind = 'mark'
                   ELSE m.kind NOT IN ('clear', 'pop') END;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF (listened > ikigai_now()) IS TRUE THEN
        PERFORM ikigai_notify('ikigai_session', CAST(sid AS text));
    END IF;
    RETURN QUERY
        INSERT INTO messages AS e (session_id, agent_uuid, kind, content, data)
        VALUES (sid, agent, ev_kind, ev_content, ev_data)
        RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at;
END
$fn$;


UPDATE schema_metadata SET schema_version = 32 WHERE schema_version < 32;
