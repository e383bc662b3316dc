-- Undo 0041: 0036's ikigai_task_upsert (its edges by INSERT ... SELECT on Citus too); no
-- ikigai_claude_append (the code before 0041 appends a transcript's entries with one statement).

DROP FUNCTION IF EXISTS ikigai_claude_append(BIGINT, TEXT[], TEXT[], TEXT[], JSONB);

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
        INSERT INTO task_deps (list_id, task_id, blocked_by_id)
        SELECT lpk, up.id, b FROM unnest(blocker_ids) AS b
        ON CONFLICT DO NOTHING;
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

UPDATE schema_metadata SET schema_version = 40 WHERE schema_version = 41;
