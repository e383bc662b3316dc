-- Citus (issue 36): task lists' tasks distributed by a key of their own. ikigai_distribute()
-- (0033) now also places tasks and task_deps (0013) on the cluster, through this migration's
-- area function ikigai_distribute_0036_tasks() (called after 0033's); on plain PostgreSQL
-- (and the embedded server) nothing is distributed, as in 0030. A database migrated before
-- citus was created in it is distributed later with `ikigai-store citus distribute`: the rows
-- of every table it distributes move to the shards.
--
-- The placement added here (the reasons are in docs/concepts/citus.md):
-- - tasks and task_deps are hash-distributed by list_id (the task_lists row id), colocated with
--   each other (a colocation group of their own: list ids, session ids and identity ids are
--   unrelated): a list's tasks and edges live on one shard, so every statement that serves one
--   list (an upsert, the dependency check, a claim, a release, a completion, its tasks, its
--   available tasks, its counts, a sync) is routed to that shard; what spans lists (every
--   list's available tasks, an owner's tasks, the counts of every list, prune, the watcher's
--   and the web view's lists) asks every shard.
--   - task_lists stays on the coordinator, as sessions does for messages: its public list_id is
--     unique (Citus keeps a unique key only with the distribution column, so a distributed
--     task_lists could not keep it), every statement that names a list by its list_id finds
--     the row there first, and task_lock_list's row lock (dependency changes of one list are
--     serialised on it) stays PostgreSQL's own.
--   - Keys gain the distribution column: tasks' primary key becomes (list_id, id), task_deps'
--     (list_id, task_id, blocked_by_id). id stays unique (the coordinator's sequence).
--     tasks_external_id_key (list_id, external_id) and tasks_list_id_id_key (list_id, id)
--     already had it, and so do task_deps' two composite foreign keys to tasks: Citus accepts
--     them between the colocated tables, and they stay (with ON DELETE CASCADE), so an edge's
--     two tasks are still of its list and deleting a task still deletes its edges.
--   - tasks' foreign key to task_lists (a coordinator table) goes, as messages' to sessions
--     did. What it guaranteed still holds, in the statements: every statement that writes a
--     task reads its list's row first and writes with that row's id as a value (an upsert
--     reads it FOR KEY SHARE, as the key's check did); no statement deletes a task list.
--   - tasks' notify triggers (0017: ikigai_task, the list ids of the changed tasks), which
--     Citus refuses on a distributed table, go; every statement of queries/tasks.sql that
--     changes tasks is now a function below that notifies the same channel and payload
--     through ikigai_notify (0032: after the commit on the library's connections). On plain
--     PostgreSQL the triggers stay (raw SQL writers still notify), and the payloads are equal,
--     so a wake-up is sent once (PostgreSQL folds equal notifications of one transaction;
--     ikigai_notify keeps an equal pair once).
-- - task_view (0013) joins a task's edges and their tasks on list_id too (the same rows: an
--   edge's tasks are of its list), which Citus needs to run the fan-out queries on it.
-- The functions are the statements of queries/tasks.sql, on both: each resolves the list on
-- the coordinator, then reads or writes that one list's rows with its id as a value, every
-- reference of tasks and task_deps filtered by it (on Citus, routed to the list's shard).
-- Same results on plain PostgreSQL. The area function is idempotent and returns one row per
-- table it changed, as ikigai_distribute() does.
-- depends: 0035-langgraph-copies-own-special-writes

CREATE OR REPLACE VIEW task_view AS
SELECT t.id, l.list_id, t.external_id, t.subject, t.description, t.active_form, t.metadata,
       t.status, t.owner,
       ARRAY(SELECT b.external_id
             FROM task_deps AS d
             JOIN tasks AS b ON b.list_id = d.list_id AND b.id = d.blocked_by_id
             WHERE d.list_id = t.list_id AND d.task_id = t.id
             ORDER BY b.id) AS blocked_by,
       ARRAY(SELECT a.external_id
             FROM task_deps AS d
             JOIN tasks AS a ON a.list_id = d.list_id AND a.id = d.task_id
             WHERE d.list_id = t.list_id AND d.blocked_by_id = t.id
             ORDER BY a.id) AS blocks,
       t.created_at, t.updated_at, t.started_at, t.completed_at,
       t.list_id AS list_pk
FROM tasks AS t
JOIN task_lists AS l ON l.id = t.list_id;

-- One list's tasks as task_view shows them (lname: the list's public id, given by the caller,
-- so that the statement reads no coordinator row), id order: all of them, or the one with
-- external id ext, or those of status st, or (avail) those anyone may claim now (pending,
-- unowned, every blocker completed or deleted; OFFSET 0 keeps that a probe of the task's
-- edges: task_available_in_list says why).
CREATE OR REPLACE FUNCTION ikigai_task_rows(lpk BIGINT, lname TEXT, ext TEXT, st TEXT,
                                            avail BOOLEAN)
RETURNS TABLE (id BIGINT, list_id TEXT, external_id TEXT, subject TEXT, description TEXT,
               active_form TEXT, metadata JSONB, status TEXT, owner TEXT, blocked_by TEXT[],
               blocks TEXT[], created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
               started_at TIMESTAMPTZ, completed_at TIMESTAMPTZ, list_pk BIGINT)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
        SELECT t.id, lname, t.external_id, t.subject, t.description, t.active_form,
               t.metadata, t.status, t.owner,
               ARRAY(SELECT b.external_id
                     FROM task_deps AS d
                     JOIN tasks AS b ON b.list_id = d.list_id AND b.id = d.blocked_by_id
                     WHERE d.list_id = lpk AND b.list_id = lpk AND d.task_id = t.id
                     ORDER BY b.id),
               ARRAY(SELECT a.external_id
                     FROM task_deps AS d
                     JOIN tasks AS a ON a.list_id = d.list_id AND a.id = d.task_id
                     WHERE d.list_id = lpk AND a.list_id = lpk AND d.blocked_by_id = t.id
                     ORDER BY a.id),
               t.created_at, t.updated_at, t.started_at, t.completed_at, t.list_id
        FROM tasks AS t
        WHERE t.list_id = lpk
          AND (ext IS NULL OR t.external_id = ext)
          AND (st IS NULL OR t.status = st)
          AND (NOT avail
               OR (t.status = 'pending' AND t.owner IS NULL
                   AND NOT EXISTS (SELECT 1
                                   FROM task_deps AS d
                                   JOIN tasks AS b
                                     ON b.list_id = d.list_id AND b.id = d.blocked_by_id
                                   WHERE d.list_id = lpk AND b.list_id = lpk
                                     AND d.task_id = t.id
                                     AND b.status NOT IN ('completed', 'deleted')
                                   OFFSET 0)))
        ORDER BY t.id;
END
$fn$;

-- task_get, task_list_tasks and task_available_in_list (queries/tasks.sql): the list found by
-- its public id (project: not NULL, only when its owner is of that project or of none), then
-- ikigai_task_rows. No list: no rows.
CREATE OR REPLACE FUNCTION ikigai_list_tasks(lname TEXT, ext TEXT, st TEXT, avail BOOLEAN,
                                             project TEXT)
RETURNS SETOF task_view
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    lpk BIGINT;
BEGIN
    SELECT l.id INTO lpk
    FROM task_lists AS l JOIN identities AS i ON i.id = l.owner_id
    WHERE l.list_id = lname
      AND (project IS NULL OR i.project_key IS NULL OR i.project_key = project);
    IF lpk IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM ikigai_task_rows(lpk, lname, ext, st, avail);
END
$fn$;

-- task_upsert's work (queries/tasks.sql states its rules), in steps that each read or write
-- one list's rows: the list's row read FOR KEY SHARE (what tasks' foreign key took); with
-- status completed, the existing task read FOR NO KEY UPDATE ("pre": under READ COMMITTED it
-- waits for a concurrent writer and returns the newest committed version, locked until
-- commit); the INSERT ... ON CONFLICT DO UPDATE, which, completing, updates only the row "pre"
-- returned (a row "pre" did not see, committed by a racing creator since, is left alone and
-- nothing is returned: tasks.py runs it again); the edges replaced; the first completion's
-- task_complete activity (its owner an identity not retired, read on the coordinator, then a
-- routed insert by ikigai_insert_activity); the wake-up; the task's row (with inserted).
-- No row: the list does not exist, or that race.
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

-- task_claim's guarded UPDATE (queries/tasks.sql states its rules) on the list's rows, then
-- the wake-up and the task's row. No row: not claimable, or no such list or task.
CREATE OR REPLACE FUNCTION ikigai_task_claim(lname TEXT, ext TEXT, claimant TEXT)
RETURNS SETOF task_view
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    -- The time, read once: Citus evaluates no function in a distributed write's SET.
    now_ts TIMESTAMPTZ := ikigai_now();
    lpk BIGINT;
BEGIN
    SELECT l.id INTO lpk FROM task_lists AS l WHERE l.list_id = lname;
    IF lpk IS NULL THEN
        RETURN;
    END IF;
    UPDATE tasks AS t
    SET status = 'in_progress', owner = claimant,
        started_at = COALESCE(t.started_at, now_ts), updated_at = now_ts
    WHERE t.list_id = lpk AND t.external_id = ext
      AND t.status = 'pending'
      AND (t.owner IS NULL OR t.owner = claimant)
      AND NOT EXISTS (SELECT 1
                      FROM task_deps AS d
                      JOIN tasks AS b ON b.list_id = d.list_id AND b.id = d.blocked_by_id
                      WHERE d.list_id = lpk AND b.list_id = lpk AND d.task_id = t.id
                        AND b.status NOT IN ('completed', 'deleted'));
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM ikigai_notify_ids('ikigai_task', CAST(lpk AS text));
    RETURN QUERY SELECT * FROM ikigai_task_rows(lpk, lname, ext, NULL, false);
END
$fn$;

-- task_release's guarded UPDATE, then the wake-up and the task's row. No row: not releasable
-- by holder, or no such list or task.
CREATE OR REPLACE FUNCTION ikigai_task_release(lname TEXT, ext TEXT, holder TEXT)
RETURNS SETOF task_view
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    -- The time, read once: Citus evaluates no function in a distributed write's SET.
    now_ts TIMESTAMPTZ := ikigai_now();
    lpk BIGINT;
BEGIN
    SELECT l.id INTO lpk FROM task_lists AS l WHERE l.list_id = lname;
    IF lpk IS NULL THEN
        RETURN;
    END IF;
    UPDATE tasks AS t
    SET status = 'pending', owner = NULL, updated_at = now_ts
    WHERE t.list_id = lpk AND t.external_id = ext
      AND t.status = 'in_progress' AND t.owner = holder;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM ikigai_notify_ids('ikigai_task', CAST(lpk AS text));
    RETURN QUERY SELECT * FROM ikigai_task_rows(lpk, lname, ext, NULL, false);
END
$fn$;

-- task_claim_refusal (locked false) and task_lock_task (locked true: the task's row locked
-- FOR UPDATE until commit): the list's id, the task's id, status and owner, and its blockers
-- neither completed nor deleted. Always one row (NULLs for a missing list or task).
CREATE OR REPLACE FUNCTION ikigai_task_state(lname TEXT, ext TEXT, locked BOOLEAN)
RETURNS TABLE (list_pk BIGINT, task_id BIGINT, status TEXT, owner TEXT, waiting_on TEXT[])
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    lpk BIGINT;
    r RECORD;
BEGIN
    SELECT l.id INTO lpk FROM task_lists AS l WHERE l.list_id = lname;
    list_pk := lpk;
    IF lpk IS NOT NULL THEN
        IF locked THEN
            SELECT t.id, t.status, t.owner INTO r
            FROM tasks AS t WHERE t.list_id = lpk AND t.external_id = ext
            FOR UPDATE;
        ELSE
            SELECT t.id, t.status, t.owner INTO r
            FROM tasks AS t WHERE t.list_id = lpk AND t.external_id = ext;
        END IF;
        IF r.id IS NOT NULL THEN
            task_id := r.id;
            status := r.status;
            owner := r.owner;
            waiting_on := ARRAY(
                SELECT b.external_id
                FROM task_deps AS d
                JOIN tasks AS b ON b.list_id = d.list_id AND b.id = d.blocked_by_id
                WHERE d.list_id = lpk AND b.list_id = lpk AND d.task_id = r.id
                  AND b.status NOT IN ('completed', 'deleted')
                ORDER BY b.id);
        END IF;
    END IF;
    RETURN NEXT;
END
$fn$;

-- task_stats_in_list's counts of one list (queries/tasks.sql), list_pk NULL: no list.
CREATE OR REPLACE FUNCTION ikigai_task_stats(lname TEXT)
RETURNS TABLE (list_pk BIGINT, total BIGINT, pending BIGINT, in_progress BIGINT,
               completed BIGINT, deleted BIGINT, available BIGINT, blocked BIGINT)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    lpk BIGINT;
BEGIN
    SELECT l.id INTO lpk FROM task_lists AS l WHERE l.list_id = lname;
    IF lpk IS NULL THEN
        list_pk := NULL;
        total := 0; pending := 0; in_progress := 0; completed := 0; deleted := 0;
        available := 0; blocked := 0;
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY
        WITH s AS MATERIALIZED (
            SELECT t.status, t.owner,
                   CASE WHEN t.status = 'pending'
                        THEN EXISTS (SELECT 1
                                     FROM task_deps AS d
                                     JOIN tasks AS b
                                       ON b.list_id = d.list_id AND b.id = d.blocked_by_id
                                     WHERE d.list_id = lpk AND b.list_id = lpk
                                       AND d.task_id = t.id
                                       AND b.status NOT IN ('completed', 'deleted')
                                     OFFSET 0)
                        ELSE false
                   END AS blocked
            FROM tasks AS t
            WHERE t.list_id = lpk
        )
        SELECT lpk,
               count(*),
               count(*) FILTER (WHERE s.status = 'pending'),
               count(*) FILTER (WHERE s.status = 'in_progress'),
               count(*) FILTER (WHERE s.status = 'completed'),
               count(*) FILTER (WHERE s.status = 'deleted'),
               count(*) FILTER (WHERE s.status = 'pending' AND s.owner IS NULL
                                  AND NOT s.blocked),
               count(*) FILTER (WHERE s.blocked)
        FROM s;
END
$fn$;

-- task_sync_list's work: the list's last_synced_at set (on the coordinator), then its tasks
-- not in active and not deleted yet made deleted (the list's rows), then the wake-up when any
-- was. list_pk NULL: no list.
CREATE OR REPLACE FUNCTION ikigai_task_sync(lname TEXT, active TEXT[])
RETURNS TABLE (list_pk BIGINT, deleted BIGINT)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    -- The time, read once: Citus evaluates no function in a distributed write's SET.
    now_ts TIMESTAMPTZ := ikigai_now();
    lpk BIGINT;
    n BIGINT := 0;
BEGIN
    UPDATE task_lists AS l SET last_synced_at = now_ts
    WHERE l.list_id = lname
    RETURNING l.id INTO lpk;
    IF lpk IS NOT NULL THEN
        UPDATE tasks AS t
        SET status = 'deleted', updated_at = now_ts
        WHERE t.list_id = lpk AND t.status <> 'deleted'
          AND t.external_id <> ALL (active);
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n > 0 THEN
            PERFORM ikigai_notify_ids('ikigai_task', CAST(lpk AS text));
        END IF;
    END IF;
    list_pk := lpk;
    deleted := n;
    RETURN NEXT;
END
$fn$;

-- task_prune's work: the completed and deleted tasks of every list (on Citus, every shard)
-- last updated before the cut deleted, their edges with them (ON DELETE CASCADE), and their
-- lists woken (0017's payload: the list ids, comma-separated). Returns how many.
CREATE OR REPLACE FUNCTION ikigai_task_prune(older_than INTERVAL)
RETURNS BIGINT
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    -- The time, read once: Citus evaluates no function in a distributed write's SET.
    now_ts TIMESTAMPTZ := ikigai_now();
    n BIGINT;
    lists TEXT;
BEGIN
    WITH gone AS (
        DELETE FROM tasks AS t
        WHERE t.status IN ('completed', 'deleted')
          AND t.updated_at < now_ts - older_than
        RETURNING t.list_id
    )
    SELECT count(*), string_agg(DISTINCT CAST(gone.list_id AS text), ',') INTO n, lists
    FROM gone;
    PERFORM ikigai_notify_ids('ikigai_task', lists);
    RETURN n;
END
$fn$;

-- This migration's area of the placement (0033: ikigai_distribute() calls it after 0033's, with
-- its lock held and citus checked).
CREATE OR REPLACE FUNCTION ikigai_distribute_0036_tasks()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    fk RECORD;
BEGIN
    -- A list's tasks and edges, colocated with each other (a group of their own), their keys
    -- with list_id, tasks' key to task_lists (a coordinator table) and notify triggers gone;
    -- task_deps' composite keys to tasks come back once both are placed.
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                   WHERE logicalrelid = 'tasks'::regclass AND partmethod = 'h') THEN
        ALTER TABLE task_deps DROP CONSTRAINT IF EXISTS task_deps_task_fkey;
        ALTER TABLE task_deps DROP CONSTRAINT IF EXISTS task_deps_blocker_fkey;
        FOR fk IN SELECT conname FROM pg_constraint
                  WHERE conrelid = 'tasks'::regclass AND contype = 'f' LOOP
            EXECUTE format('ALTER TABLE tasks DROP CONSTRAINT %I', fk.conname);
        END LOOP;
        DROP TRIGGER IF EXISTS tasks_notify_insert ON tasks;
        DROP TRIGGER IF EXISTS tasks_notify_update ON tasks;
        DROP TRIGGER IF EXISTS tasks_notify_delete ON tasks;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'tasks'::regclass AND conname = 'tasks_pkey'
                     AND cardinality(conkey) = 1) THEN
            ALTER TABLE tasks DROP CONSTRAINT tasks_pkey;
            ALTER TABLE tasks ADD CONSTRAINT tasks_pkey PRIMARY KEY (list_id, id);
        END IF;
        PERFORM create_distributed_table('tasks', 'list_id', colocate_with => 'none');
        relation := 'tasks';
        made := 'distributed by list_id';
        RETURN NEXT;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                   WHERE logicalrelid = 'task_deps'::regclass AND partmethod = 'h') THEN
        ALTER TABLE task_deps DROP CONSTRAINT IF EXISTS task_deps_task_fkey;
        ALTER TABLE task_deps DROP CONSTRAINT IF EXISTS task_deps_blocker_fkey;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'task_deps'::regclass AND conname = 'task_deps_pkey'
                     AND cardinality(conkey) = 2) THEN
            ALTER TABLE task_deps DROP CONSTRAINT task_deps_pkey;
            ALTER TABLE task_deps ADD CONSTRAINT task_deps_pkey
                PRIMARY KEY (list_id, task_id, blocked_by_id);
        END IF;
        PERFORM create_distributed_table('task_deps', 'list_id', colocate_with => 'tasks');
        relation := 'task_deps';
        made := 'distributed by list_id, colocated with tasks';
        RETURN NEXT;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'task_deps'::regclass AND conname = 'task_deps_task_fkey') THEN
        ALTER TABLE task_deps ADD CONSTRAINT task_deps_task_fkey FOREIGN KEY (list_id, task_id)
            REFERENCES tasks (list_id, id) ON DELETE CASCADE;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'task_deps'::regclass
                     AND conname = 'task_deps_blocker_fkey') THEN
        ALTER TABLE task_deps ADD CONSTRAINT task_deps_blocker_fkey
            FOREIGN KEY (list_id, blocked_by_id) REFERENCES tasks (list_id, id) ON DELETE CASCADE;
    END IF;
END
$fn$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM ikigai_distribute();
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 36 WHERE schema_version < 36;
