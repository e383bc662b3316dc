-- Undo 0032: the triggers, the appends and ikigai_notify_ids call pg_notify again (in the
-- writing transaction, whatever the connection's settings); the version goes back to 30.
-- Wake-ups a connection deferred and did not send yet are not sent (at worst a waiter looks
-- again at its deadline).

CREATE OR REPLACE FUNCTION ikigai_notify_ids(channel TEXT, ids TEXT) RETURNS void
LANGUAGE sql
AS $fn$
    SELECT pg_notify(channel, CASE WHEN length(ids) > 7000 THEN '*' ELSE ids END)
    WHERE ids IS NOT NULL
$fn$;

CREATE OR REPLACE FUNCTION queue_notify_available() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    ids TEXT;
BEGIN
    SELECT string_agg(DISTINCT topic_id::text, ',') INTO ids
    FROM changed WHERE state = 'available';
    IF ids IS NOT NULL THEN
        PERFORM pg_notify('ikigai_queue', CASE WHEN length(ids) > 7000 THEN '*' ELSE ids END);
    END IF;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION mail_notify_unread_row() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM pg_notify('ikigai_mail', NEW.identity_id::text);
    RETURN NULL;
END
$fn$;

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
        PERFORM pg_notify('ikigai_session', CAST(sid AS text));
    END IF;
    RETURN QUERY
        INSERT INTO messages AS e (session_id, agent_uuid, kind, content, data)
        VALUES (sid, agent, ev_kind, ev_content, ev_data)
        RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at;
END
$fn$;

DROP FUNCTION IF EXISTS ikigai_send_wakes();
DROP FUNCTION IF EXISTS ikigai_notify(TEXT, TEXT);

UPDATE schema_metadata SET schema_version = 31 WHERE schema_version = 32;
