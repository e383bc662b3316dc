-- The checks of a routed insert go into its VALUES (issue 36): one append, one activity and one
-- summary are each one INSERT ... VALUES whose distribution value comes from a function that
-- checks (and locks) what the write depends on; a batch of appends and a LangGraph put send
-- their rows to the shard as one multi-row INSERT.
--
-- Until now each called a PL/pgSQL function (ikigai_append(), migrations 0030 and 0032;
-- ikigai_record_activity() and ikigai_add_summary(), migration 0033) that checked, then inserted
-- the row with an INSERT of its own. On Citus that inner INSERT ran inside the function's
-- statement, so the coordinator opened a transaction block on the worker (BEGIN, the INSERT)
-- and ended it at the commit with a second round trip: 0.53-0.56 ms an append on the test
-- cluster, where a plain routed INSERT takes 0.25-0.27 (a probe of the raw statements). Citus evaluates a volatile function in
-- an INSERT's VALUES on the coordinator before it routes the row; with the checks in such a
-- function, the insert itself is a single-shard statement, sent to the worker as one command
-- (0.32-0.33 ms). On plain PostgreSQL both forms cost the same.
--
-- - ikigai_append_id(sid, agent, ev_kind, target) runs ikigai_append()'s checks and locks,
--   in its order, then draws the event's id; queries/messages.sql's append_event,
--   append_agent_event and append_message insert the event with it as the id (the first
--   column, whose value is computed first: an id drawn before the session's lock, as a
--   column default would be, could commit after a reader that locked the session and saw a
--   higher id, session_wait_appends' promise). The session's row is locked FOR KEY SHARE
--   (end_session's FOR UPDATE waits for it), the agent's FOR SHARE (kill_agent's UPDATE
--   waits), the listened session's wake-up goes through ikigai_notify, all as before.
-- - ikigai_active_identity(who, refusal) returns the id of the identity called who, which must
--   exist and not be retired (read, not locked, as before: identities are never deleted);
--   activities_record and summaries_add insert with it.
-- - ikigai_append_batch(sid, agent, kinds, contents, datas) is append_events' and
--   append_agent_events' statement; langgraph_put stores its blobs and the new function
--   langgraph_put_writes (the statement of that name) a task's writes the same way: the
--   checks and locks as before, then, on Citus (ikigai_is_distributed), the rows as one
--   multi-row INSERT ... VALUES of literals, one command to the session's shard, where an
--   INSERT ... SELECT from unnest went through intermediate results copied to the workers and
--   a two-phase commit. Elsewhere the INSERT ... SELECT stays.
-- What changes: a refused write raises instead of returning no row, so that no row is
-- inserted. SQLSTATE IK404 (the session, the agent or the identity does not exist) or IK400
-- (the session has ended, the agent is not a running agent of it, the target is not one the
-- kind can aim at, the identity is retired), with the library's message
-- (ikigai_store.errors.translate reads both). In a caller's own transaction the refusal fails
-- the transaction, as any error does (store.transaction() runs each call in a savepoint).
-- ikigai_append(), ikigai_record_activity() and ikigai_add_summary() go: nothing calls them.
-- The rollback restores them and 0033's langgraph_put.
-- depends: 0039-post-mail-batch

-- Raise why an append to session sid (by agent, when not NULL) is refused, once the checks
-- found the session not open or the agent not running in it: IK404 when the session or the
-- agent does not exist, IK400 otherwise. It always raises: what the checks found cannot be
-- undone (an ended session stays ended, a stopped agent stopped, a deleted row deleted).
CREATE OR REPLACE FUNCTION ikigai_append_refusal(sid BIGINT, agent TEXT) RETURNS void
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    ended TIMESTAMPTZ;
    found_session BIGINT;
    found_status TEXT;
BEGIN
    SELECT s.ended_at INTO ended FROM sessions AS s WHERE s.id = sid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'session % does not exist', sid USING ERRCODE = 'IK404';
    ELSIF ended IS NOT NULL THEN
        RAISE EXCEPTION 'session % has ended: it accepts no more events', sid
            USING ERRCODE = 'IK400';
    END IF;
    IF agent IS NULL THEN
        RAISE EXCEPTION 'session % is not open to appends', sid USING ERRCODE = 'IK400';
    END IF;
    SELECT a.session_id, a.status INTO found_session, found_status
    FROM agents AS a WHERE a.uuid = agent;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'agent % does not exist', agent USING ERRCODE = 'IK404';
    ELSIF found_session IS DISTINCT FROM sid THEN
        RAISE EXCEPTION 'agent % is not an agent of session %', agent, sid
            USING ERRCODE = 'IK400';
    ELSIF found_status <> 'running' THEN
        RAISE EXCEPTION 'agent % is %: it accepts no more events (append agent_killed '
                        'before kill_agent)', agent, found_status
            USING ERRCODE = 'IK400';
    END IF;
    RAISE EXCEPTION 'agent % is not open to appends', agent USING ERRCODE = 'IK400';
END
$fn$;

-- An append's locks (see the top of this file): the session's row, FOR KEY SHARE for one
-- event or FOR UPDATE for a batch (exclusive), which must exist and not have ended, and the
-- agent's row FOR SHARE when agent is not NULL, which must be a running agent of it; else
-- ikigai_append_refusal raises. Returns the session's listened_until (its wake-up).
CREATE OR REPLACE FUNCTION ikigai_append_lock(sid BIGINT, agent TEXT, exclusive BOOLEAN)
RETURNS TIMESTAMPTZ
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    listened TIMESTAMPTZ;
BEGIN
    IF exclusive THEN
        SELECT s.listened_until INTO listened
        FROM sessions AS s WHERE s.id = sid AND s.ended_at IS NULL
        FOR UPDATE;
    ELSE
        SELECT s.listened_until INTO listened
        FROM sessions AS s WHERE s.id = sid AND s.ended_at IS NULL
        FOR KEY SHARE;
    END IF;
    IF NOT FOUND THEN
        PERFORM ikigai_append_refusal(sid, NULL);
    END IF;
    IF agent IS NOT NULL THEN
        PERFORM 1 FROM agents AS a
        WHERE a.uuid = agent AND a.session_id = sid AND a.status = 'running'
        FOR SHARE;
        IF NOT FOUND THEN
            PERFORM ikigai_append_refusal(sid, agent);
        END IF;
    END IF;
    RETURN listened;
END
$fn$;

-- One append's checks, locks and wake-up, then its id, drawn from messages' sequence once the
-- session's row is locked (see the top of this file).
CREATE OR REPLACE FUNCTION ikigai_append_id(sid BIGINT, agent TEXT, ev_kind TEXT, target BIGINT)
RETURNS BIGINT
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    listened TIMESTAMPTZ;
BEGIN
    listened := ikigai_append_lock(sid, agent, false);
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
    RETURN nextval(pg_get_serial_sequence('messages', 'id'));
END
$fn$;

-- Whether the table named rel is distributed by Citus (its pg_dist_partition row); false on
-- plain PostgreSQL, where that catalog does not exist (read through EXECUTE, so the function
-- is valid without it).
CREATE OR REPLACE FUNCTION ikigai_is_distributed(rel TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    distributed BOOLEAN := false;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition '
                'WHERE logicalrelid = CAST($1 AS regclass))'
        INTO distributed USING rel;
    END IF;
    RETURN distributed;
END
$fn$;

-- A batch of events of session sid (and of agent, when not NULL) in one call, all or none:
-- the i-th event is (kinds[i], contents[i], datas[i]: JSON text) and takes the i-th id. The
-- session's row is locked FOR UPDATE (not FOR KEY SHARE like a single append) before any id is
-- drawn: ids are drawn row by row, so two batches (or a batch and single appends) sharing the
-- lock would interleave their ids; this way a batch waits for the appends in flight, later
-- ones wait for it, and its ids are consecutive. The agent's row is locked FOR SHARE. A
-- refusal raises (ikigai_append_refusal). On Citus (messages distributed) the rows are one
-- multi-row INSERT ... VALUES of literals, which Citus sends to the session's shard as one
-- command, where an INSERT ... SELECT would go through intermediate results on every worker
-- and a two-phase commit (10 events: 1.0 ms instead of 3.8-4.0 on the test cluster; 100:
-- 4.2 instead of 5.5). Elsewhere one INSERT ... SELECT from unnest.
CREATE OR REPLACE FUNCTION ikigai_append_batch(sid BIGINT, agent TEXT, kinds TEXT[],
                                               contents TEXT[], datas TEXT[])
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    listened TIMESTAMPTZ;
    rows_sql TEXT;
BEGIN
    listened := ikigai_append_lock(sid, agent, true);
    IF (listened > ikigai_now()) IS TRUE THEN
        PERFORM ikigai_notify('ikigai_session', CAST(sid AS text));
    END IF;
    IF ikigai_is_distributed('messages') THEN
        SELECT string_agg(format('(%s, %L, %L, %L, CAST(%L AS jsonb))',
                                 sid, agent, e.k, e.c, e.d), ', ' ORDER BY e.n)
        INTO rows_sql
        FROM unnest(kinds, contents, datas) WITH ORDINALITY AS e (k, c, d, n);
        IF rows_sql IS NULL THEN  -- no events
            RETURN;
        END IF;
        RETURN QUERY EXECUTE
            'INSERT INTO messages AS e (session_id, agent_uuid, kind, content, data) VALUES '
            || rows_sql
            || ' RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, '
               'e.created_at';
    ELSE
        RETURN QUERY
            INSERT INTO messages AS e (session_id, agent_uuid, kind, content, data)
            SELECT sid, agent, u.k, u.c, CAST(u.d AS jsonb)
            FROM unnest(kinds, contents, datas) WITH ORDINALITY AS u (k, c, d, n)
            ORDER BY u.n
            RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data,
                      e.created_at;
    END IF;
END
$fn$;

-- langgraph_put (0033's, in steps), its blobs inserted as ikigai_append_batch inserts events:
-- on Citus one multi-row INSERT ... VALUES of literals (one command to the session's shard;
-- an INSERT ... SELECT from unnest went through intermediate results and a two-phase
-- commit: a step of a LangGraph thread, aput + aget_tuple, 3.3 -> 2.2 ms on the test
-- cluster), elsewhere 0033's INSERT ... SELECT. Nothing else changes.
CREATE OR REPLACE FUNCTION langgraph_put(
    p_thread_id TEXT, p_title TEXT, p_checkpoint_ns TEXT, p_checkpoint_id TEXT,
    p_parent_checkpoint_id TEXT, p_checkpoint JSONB, p_metadata JSONB, p_channels TEXT[],
    p_versions TEXT[], p_types TEXT[], p_blobs BYTEA[], p_bases TEXT[])
RETURNS TABLE (session_id BIGINT, missing TEXT[], stored BIGINT)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
    source BIGINT;
    l RECORD;
    held_c TEXT[];
    held_v TEXT[];
    lacking TEXT[];
    n BIGINT;
    rows_sql TEXT;
BEGIN
    SELECT t.session_id, t.source_session_id INTO sid, source
    FROM langgraph_threads AS t WHERE t.thread_id = p_thread_id
    FOR KEY SHARE;
    IF NOT FOUND THEN
        INSERT INTO sessions AS s (title) VALUES (p_title) RETURNING s.id INTO sid;
        INSERT INTO langgraph_threads (session_id, thread_id) VALUES (sid, p_thread_id);
    END IF;
    -- The channels whose base is not in the lineage: looked for among the thread's own blobs,
    -- then among each source's (up to its bound), each one session's rows.
    SELECT COALESCE(array_agg(w.channel), '{}') INTO lacking
    FROM unnest(p_channels, p_bases) AS w (channel, base) WHERE w.base IS NOT NULL;
    IF cardinality(lacking) > 0 THEN
        FOR l IN SELECT * FROM langgraph_lineage(sid) AS x
                 WHERE x.depth = 0 OR source IS NOT NULL ORDER BY x.depth LOOP
            SELECT COALESCE(array_agg(o.channel), '{}'), COALESCE(array_agg(o.version), '{}')
            INTO held_c, held_v
            FROM langgraph_blobs AS o
            WHERE o.session_id = l.session_id AND o.checkpoint_ns = p_checkpoint_ns
              AND o.channel = ANY (lacking) AND o.version = ANY (p_bases) AND o.id <= l.bound;
            SELECT COALESCE(array_agg(w.channel), '{}') INTO lacking
            FROM unnest(p_channels, p_bases) AS w (channel, base)
            WHERE w.channel = ANY (lacking)
              AND NOT EXISTS (SELECT 1 FROM unnest(held_c, held_v) AS h (channel, version)
                              WHERE h.channel = w.channel AND h.version = w.base);
            EXIT WHEN cardinality(lacking) = 0;
        END LOOP;
    END IF;
    INSERT INTO langgraph_checkpoints AS c (session_id, checkpoint_ns, checkpoint_id,
                                            parent_checkpoint_id, checkpoint, metadata)
    VALUES (sid, p_checkpoint_ns, p_checkpoint_id, p_parent_checkpoint_id, p_checkpoint,
            p_metadata)
    ON CONFLICT (session_id, checkpoint_ns, checkpoint_id) DO UPDATE
    SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
        checkpoint = EXCLUDED.checkpoint,
        metadata = EXCLUDED.metadata;
    IF ikigai_is_distributed('langgraph_blobs') THEN
        SELECT string_agg(format('(%s, %L, %L, %L, %L, CAST(%L AS bytea), %L)', sid,
                                 p_checkpoint_ns, w.channel, w.version, w.type, w.blob, w.base),
                          ', ')
        INTO rows_sql
        FROM unnest(p_channels, p_versions, p_types, p_blobs, p_bases)
             AS w (channel, version, type, blob, base)
        WHERE NOT (w.channel = ANY (lacking));
        n := 0;
        IF rows_sql IS NOT NULL THEN
            EXECUTE 'INSERT INTO langgraph_blobs (session_id, checkpoint_ns, channel, version, '
                    'type, blob, base_version) VALUES ' || rows_sql
                    || ' ON CONFLICT (session_id, checkpoint_ns, channel, version) DO NOTHING';
            GET DIAGNOSTICS n = ROW_COUNT;
        END IF;
    ELSE
        INSERT INTO langgraph_blobs (session_id, checkpoint_ns, channel, version, type, blob,
                                     base_version)
        SELECT sid, p_checkpoint_ns, w.channel, w.version, w.type, w.blob, w.base
        FROM unnest(p_channels, p_versions, p_types, p_blobs, p_bases)
             AS w (channel, version, type, blob, base)
        WHERE NOT (w.channel = ANY (lacking))
        ON CONFLICT (session_id, checkpoint_ns, channel, version) DO NOTHING;
        GET DIAGNOSTICS n = ROW_COUNT;
    END IF;
    session_id := sid;
    missing := lacking;
    stored := n;
    RETURN NEXT;
END
$fn$;

-- langgraph_put_writes (until now a statement of queries/langgraph.sql, whose INSERT ...
-- SELECT went through intermediate results on Citus) as a function, in steps: the thread's row
-- locked FOR KEY SHARE (made, with its session, on first use), then the writes: on Citus one
-- multi-row INSERT ... VALUES of literals to the session's shard, elsewhere one INSERT ...
-- SELECT from unnest. A write already stored under (task_id, idx) is kept, or replaced when
-- p_upsert; on a copy, a plain write under a (task_id, idx) it inherited is not added (the
-- writes it shows: langgraph_pending_writes). Returns the session id and how many rows were
-- written.
CREATE OR REPLACE FUNCTION langgraph_put_writes(
    p_thread_id TEXT, p_title TEXT, p_checkpoint_ns TEXT, p_checkpoint_id TEXT, p_task_id TEXT,
    p_task_path TEXT, p_idxs INTEGER[], p_channels TEXT[], p_types TEXT[], p_blobs BYTEA[],
    p_upsert BOOLEAN)
RETURNS TABLE (session_id BIGINT, stored BIGINT)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
    source BIGINT;
    rows_sql TEXT;
    n BIGINT := 0;
BEGIN
    SELECT t.session_id, t.source_session_id INTO sid, source
    FROM langgraph_threads AS t WHERE t.thread_id = p_thread_id
    FOR KEY SHARE;
    IF NOT FOUND THEN
        INSERT INTO sessions AS s (title) VALUES (p_title) RETURNING s.id INTO sid;
        INSERT INTO langgraph_threads (session_id, thread_id) VALUES (sid, p_thread_id);
    END IF;
    IF ikigai_is_distributed('langgraph_writes') THEN
        SELECT string_agg(format('(%s, %L, %L, %L, %L, %L, %L, %L, CAST(%L AS bytea))', sid,
                                 p_checkpoint_ns, p_checkpoint_id, p_task_id, p_task_path,
                                 w.idx, w.channel, w.type, w.blob), ', ')
        INTO rows_sql
        FROM unnest(p_idxs, p_channels, p_types, p_blobs) AS w (idx, channel, type, blob)
        WHERE p_upsert OR source IS NULL
           OR NOT EXISTS (
               SELECT 1
               FROM langgraph_pending_writes(sid, p_checkpoint_ns, p_checkpoint_id) AS p
               WHERE p.task_id = p_task_id AND p.idx = w.idx);
        IF rows_sql IS NOT NULL THEN
            EXECUTE 'INSERT INTO langgraph_writes AS x (session_id, checkpoint_ns, '
                    'checkpoint_id, task_id, task_path, idx, channel, type, blob) VALUES '
                    || rows_sql
                    || ' ON CONFLICT (session_id, checkpoint_ns, checkpoint_id, task_id, idx) '
                       'DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, '
                       'blob = EXCLUDED.blob, task_path = EXCLUDED.task_path WHERE '
                    || CASE WHEN p_upsert THEN 'true' ELSE 'false' END;
            GET DIAGNOSTICS n = ROW_COUNT;
        END IF;
    ELSE
        INSERT INTO langgraph_writes AS x (session_id, checkpoint_ns, checkpoint_id, task_id,
                                           task_path, idx, channel, type, blob)
        SELECT sid, p_checkpoint_ns, p_checkpoint_id, p_task_id, p_task_path, w.idx,
               w.channel, w.type, w.blob
        FROM unnest(p_idxs, p_channels, p_types, p_blobs) AS w (idx, channel, type, blob)
        WHERE p_upsert OR source IS NULL
           OR NOT EXISTS (
               SELECT 1
               FROM langgraph_pending_writes(sid, p_checkpoint_ns, p_checkpoint_id) AS p
               WHERE p.task_id = p_task_id AND p.idx = w.idx)
        ON CONFLICT (session_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
        SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
            task_path = EXCLUDED.task_path
        WHERE p_upsert;
        GET DIAGNOSTICS n = ROW_COUNT;
    END IF;
    session_id := sid;
    stored := n;
    RETURN NEXT;
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
