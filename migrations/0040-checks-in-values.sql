-- The checks of a routed insert go into its VALUES (issue 36): one append, one activity and one
-- summary are each one INSERT ... VALUES whose distribution value comes from a function that
-- checks (and locks) what the write depends on.
--
-- Until now each called a PL/pgSQL function (ikigai_append(), migrations 0030 and 0032;
-- ikigai_record_activity() and ikigai_add_summary(), migration 0033) that checked, then inserted
-- the row with an INSERT of its own. On Citus that inner INSERT ran inside the function's
-- statement, so the coordinator opened a transaction block on the worker (BEGIN, the INSERT)
-- and ended it at the commit with a second round trip: 0.53-0.56 ms an append on the test
-- cluster, where a plain routed INSERT takes 0.25-0.27. Citus evaluates a volatile function in
-- an INSERT's VALUES on the coordinator before it routes the row; with the checks in such a
-- function, the insert itself is a single-shard statement, sent to the worker as one command
-- (0.32-0.33 ms). On plain PostgreSQL both forms cost the same.
--
-- - ikigai_append_check(sid, agent, ev_kind, target) runs ikigai_append()'s checks and locks,
--   in its order, and returns sid; queries/messages.sql's append_event, append_agent_event and
--   append_message insert the event with it. The session's row is locked FOR KEY SHARE
--   (end_session's FOR UPDATE waits for it), the agent's FOR SHARE (kill_agent's UPDATE
--   waits), the listened session's wake-up goes through ikigai_notify, all as before.
-- - ikigai_active_identity(who, refusal) returns the id of the identity called who, which must
--   exist and not be retired (read, not locked, as before: identities are never deleted);
--   activities_record and summaries_add insert with it.
-- What changes: a refused write raises instead of returning no row, so that no row is
-- inserted. SQLSTATE IK404 (the session, the agent or the identity does not exist) or IK400
-- (the session has ended, the agent is not a running agent of it, the target is not one the
-- kind can aim at, the identity is retired), with the library's message
-- (ikigai_store.errors.translate reads both). In a caller's own transaction the refusal fails
-- the transaction, as any error does (store.transaction() runs each call in a savepoint).
-- ikigai_append(), ikigai_record_activity() and ikigai_add_summary() go: nothing calls them.
-- depends: 0039-post-mail-batch

CREATE OR REPLACE FUNCTION ikigai_append_check(sid BIGINT, agent TEXT, ev_kind TEXT, target BIGINT)
RETURNS BIGINT
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    listened TIMESTAMPTZ;
    ended TIMESTAMPTZ;
    found_session BIGINT;
    found_status TEXT;
BEGIN
    SELECT s.listened_until INTO listened
    FROM sessions AS s WHERE s.id = sid AND s.ended_at IS NULL
    FOR KEY SHARE;
    IF NOT FOUND THEN
        SELECT s.ended_at INTO ended FROM sessions AS s WHERE s.id = sid;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'session % does not exist', sid USING ERRCODE = 'IK404';
        END IF;
        RAISE EXCEPTION 'session % has ended: it accepts no more events', sid
            USING ERRCODE = 'IK400';
    END IF;
    IF agent IS NOT NULL THEN
        PERFORM 1 FROM agents AS a
        WHERE a.uuid = agent AND a.session_id = sid AND a.status = 'running'
        FOR SHARE;
        IF NOT FOUND THEN
            SELECT a.session_id, a.status INTO found_session, found_status
            FROM agents AS a WHERE a.uuid = agent;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'agent % does not exist', agent USING ERRCODE = 'IK404';
            ELSIF found_session IS DISTINCT FROM sid THEN
                RAISE EXCEPTION 'agent % is not an agent of session %', agent, sid
                    USING ERRCODE = 'IK400';
            END IF;
            RAISE EXCEPTION 'agent % is %: it accepts no more events (append agent_killed '
                            'before kill_agent)', agent, found_status
                USING ERRCODE = 'IK400';
        END IF;
    END IF;
    IF target IS NOT NULL THEN
        PERFORM 1 FROM messages AS m
        WHERE m.session_id = sid AND m.id = target
          AND CASE WHEN ev_kind = 'rewind' THEN m.kind = 'mark'
                   ELSE m.kind NOT IN ('clear', 'pop') END;
        IF NOT FOUND THEN
            IF ev_kind = 'rewind' THEN
                RAISE EXCEPTION 'rewind target % is not a mark event of session %', target, sid
                    USING ERRCODE = 'IK400';
            END IF;
            RAISE EXCEPTION 'pop target % is not an event of session % that a pop can remove '
                            '(any but a clear or a pop)', target, sid
                USING ERRCODE = 'IK400';
        END IF;
    END IF;
    IF (listened > ikigai_now()) IS TRUE THEN
        PERFORM ikigai_notify('ikigai_session', CAST(sid AS text));
    END IF;
    RETURN sid;
END
$fn$;

CREATE OR REPLACE FUNCTION ikigai_active_identity(who TEXT, refusal TEXT)
RETURNS BIGINT
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    iid BIGINT;
    retired TIMESTAMPTZ;
BEGIN
    SELECT i.id, i.retired_at INTO iid, retired FROM identities AS i WHERE i.name = who;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'identity ''%'' does not exist', who USING ERRCODE = 'IK404';
    END IF;
    IF retired IS NOT NULL THEN
        RAISE EXCEPTION 'identity ''%'' is retired: %', who, refusal USING ERRCODE = 'IK400';
    END IF;
    RETURN iid;
END
$fn$;

DROP FUNCTION IF EXISTS ikigai_append(BIGINT, TEXT, TEXT, TEXT, JSONB, BIGINT);
DROP FUNCTION IF EXISTS ikigai_record_activity(TEXT, TEXT, TEXT, JSONB);
DROP FUNCTION IF EXISTS ikigai_add_summary(TEXT, TEXT, TEXT, TEXT, DOUBLE PRECISION);

UPDATE schema_metadata SET schema_version = 40 WHERE schema_version < 40;
