-- A batch reaches its shard as one command (issue 36), for the two batches migration 0040 left:
-- a task's dependencies and a Claude Agent SDK transcript's entries.
--
-- - ikigai_task_upsert (migration 0036) inserted a task's new edges (blocked_by) with an
--   INSERT ... SELECT from unnest: on Citus that goes through intermediate results copied to
--   the workers and a two-phase commit, 5.3-5.7 ms an upsert with two blockers on the test
--   cluster against 1.4 ms on plain PostgreSQL (a probe; scripts/bench_citus.py, alternated
--   with the change: 4.8-5.4 -> 3.7-3.8 ms). Now, on Citus
--   (ikigai_is_distributed, migration 0040), the edges are one multi-row INSERT ... VALUES
--   of literals (format's %L), as 0040 does for a batch of events; elsewhere the
--   INSERT ... SELECT as before. Nothing else in the function changes: its rules are 0036's.
-- - ikigai_claude_append(sid, kinds, contents, datas, new_summary) is queries/claude.sql's
--   claude_append_entries, which was one statement of CTEs. On Citus each CTE of a statement
--   that reads a distributed table becomes an intermediate result, and its batch was copied
--   to the session's shard to be joined there with the session's uuids: 6-7 ms a batch of
--   three entries on the test cluster against 0.7 ms on plain PostgreSQL (a probe;
--   scripts/bench_citus.py, alternated with the change: 6.4-8.1 -> 1.70-1.76 ms). Now the
--   function reads the batch's uuids the session has (one statement, to the session's shard
--   alone, planned per call), keeps the fresh entries (no uuid, or one neither the session nor an
--   earlier entry of the batch has; as before), stores them with ikigai_append_batch
--   (migration 0040: the session locked FOR UPDATE, its refusals raised, the wake-up) unless
--   there are none, then stamps the transcript as before. The statement claude_append_entries
--   therefore raises (IK404, IK400) for a missing or ended session where it returned
--   appended < fresh.
-- depends: 0040-checks-in-values

CREATE OR REPLACE FUNCTION ikigai_task_upsert(
    lname TEXT, ext TEXT, p_subject TEXT, p_description TEXT, p_active_form TEXT,
    p_metadata JSONB, p_status TEXT, p_owner TEXT, replace_deps BOOLEAN, blocker_ids BIGINT[])
RETURNS TABLE (id BIGINT, list_id TEXT, external_id TEXT, subject TEXT, description TEXT,
               active_form TEXT, metadata JSONB, status TEXT, owner TEXT, blocked_by TEXT[],
               blocks TEXT[], created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
               started_at TIMESTAMPTZ, completed_at TIMESTAMPTZ, list_pk BIGINT,
               inserted BOOLEAN)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    -- The time, read once: Citus evaluates no function in a distributed write's SET.
    now_ts TIMESTAMPTZ := ikigai_now();
    lpk BIGINT;
    pre_id BIGINT;
    pre_done TIMESTAMPTZ;
    up RECORD;
    who BIGINT;
BEGIN
    SELECT l.id INTO lpk FROM task_lists AS l WHERE l.list_id = lname FOR KEY SHARE;
    IF lpk IS NULL THEN
        RETURN;
    END IF;
    IF p_status = 'completed' THEN
        SELECT t.id, t.completed_at INTO pre_id, pre_done
        FROM tasks AS t
        WHERE t.list_id = lpk AND t.external_id = ext
        FOR NO KEY UPDATE;
    END IF;
    INSERT INTO tasks AS t (list_id, external_id, subject, description, active_form, metadata,
                            status, owner, started_at, completed_at)
    VALUES (lpk, ext, COALESCE(p_subject, ''), p_description, p_active_form,
            COALESCE(p_metadata, '{}'), COALESCE(p_status, 'pending'), p_owner,
            CASE WHEN p_status = 'in_progress' THEN now_ts END,
            CASE WHEN p_status = 'completed' THEN now_ts END)
    ON CONFLICT (list_id, external_id) DO UPDATE
    SET subject = COALESCE(p_subject, t.subject),
        description = COALESCE(EXCLUDED.description, t.description),
        active_form = COALESCE(EXCLUDED.active_form, t.active_form),
        metadata = t.metadata || EXCLUDED.metadata,
        status = COALESCE(p_status, t.status),
        owner = COALESCE(EXCLUDED.owner, t.owner),
        started_at = COALESCE(t.started_at, EXCLUDED.started_at),
        completed_at = COALESCE(t.completed_at, EXCLUDED.completed_at),
        updated_at = now_ts
    WHERE p_status IS DISTINCT FROM 'completed' OR t.id = pre_id
    RETURNING t.id, t.subject, t.owner, (t.xmax = 0) AS fresh INTO up;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF replace_deps THEN
        DELETE FROM task_deps AS d
        WHERE d.list_id = lpk AND d.task_id = up.id
          AND d.blocked_by_id <> ALL (blocker_ids);
        IF cardinality(blocker_ids) > 0 THEN
            IF ikigai_is_distributed('task_deps') THEN
                -- One multi-row INSERT ... VALUES: one command to the list's shard.
                EXECUTE 'INSERT INTO task_deps (list_id, task_id, blocked_by_id) VALUES '
                    || (SELECT string_agg(format('(%L, %L, %L)', lpk, up.id, b), ', ')
                        FROM unnest(blocker_ids) AS b)
                    || ' ON CONFLICT DO NOTHING';
            ELSE
                INSERT INTO task_deps (list_id, task_id, blocked_by_id)
                SELECT lpk, up.id, b FROM unnest(blocker_ids) AS b
                ON CONFLICT DO NOTHING;
            END IF;
        END IF;
    END IF;
    IF p_status = 'completed' AND (up.fresh OR (pre_id IS NOT NULL AND pre_done IS NULL)) THEN
        SELECT i.id INTO who FROM identities AS i
        WHERE i.name = up.owner AND i.retired_at IS NULL;
        IF who IS NOT NULL THEN
            PERFORM ikigai_insert_activity(
                who => who, act_type => 'task_complete',
                act_description => 'completed task ' || ext || ' "' || up.subject
                    || '" in list ' || lname,
                act_metadata => jsonb_build_object('list_id', lname, 'external_id', ext,
                                                   'task_id', up.id));
        END IF;
    END IF;
    PERFORM ikigai_notify_ids('ikigai_task', CAST(lpk AS text));
    RETURN QUERY
        SELECT r.*, up.fresh FROM ikigai_task_rows(lpk, lname, ext, NULL, false) AS r;
END
$fn$;

-- queries/claude.sql's claude_append_entries (its rules): (fresh, appended), the entries kept
-- and the events stored; raises as ikigai_append_batch does when there is something to store.
CREATE OR REPLACE FUNCTION ikigai_claude_append(sid BIGINT, kinds TEXT[], contents TEXT[],
                                                datas TEXT[], new_summary JSONB)
RETURNS TABLE (fresh BIGINT, appended BIGINT)
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    held TEXT[];
    keep_kinds TEXT[];
    keep_contents TEXT[];
    keep_datas TEXT[];
    stored BIGINT := 0;
BEGIN
    -- Planned per call (EXECUTE): a plan made while messages is small would keep scanning
    -- it whole for the uuids.
    EXECUTE 'SELECT COALESCE(array_agg(DISTINCT m.data ->> ''uuid''), ''{}'')
             FROM messages AS m
             WHERE m.session_id = $1 AND m.data ? ''uuid'' AND (m.data ->> ''uuid'') = ANY ($2)'
    INTO held
    USING sid, ARRAY(SELECT CAST(d AS jsonb) ->> 'uuid' FROM unnest(datas) AS d);
    -- An entry without a uuid (or whose uuid is JSON null) is always kept.
    SELECT COALESCE(array_agg(e.kind ORDER BY e.n), '{}'),
           COALESCE(array_agg(e.content ORDER BY e.n), '{}'),
           COALESCE(array_agg(e.data ORDER BY e.n), '{}')
    INTO keep_kinds, keep_contents, keep_datas
    FROM (SELECT u.kind, u.content, u.data, u.n, CAST(u.data AS jsonb) ->> 'uuid' AS uuid,
                 min(u.n) OVER (PARTITION BY CAST(u.data AS jsonb) ->> 'uuid') AS first
          FROM unnest(kinds, contents, datas) WITH ORDINALITY AS u (kind, content, data, n))
         AS e
    WHERE e.uuid IS NULL OR (e.n = e.first AND NOT (e.uuid = ANY (held)));
    IF cardinality(keep_kinds) > 0 THEN
        SELECT count(*) INTO stored
        FROM ikigai_append_batch(sid, NULL, keep_kinds, keep_contents, keep_datas);
    END IF;
    UPDATE claude_transcripts AS c
    SET mtime = NOW(), summary = COALESCE(new_summary, c.summary)
    WHERE c.session_id = sid;
    RETURN QUERY SELECT CAST(cardinality(keep_kinds) AS bigint), stored;
END
$fn$;

UPDATE schema_metadata SET schema_version = 41 WHERE schema_version < 41;
