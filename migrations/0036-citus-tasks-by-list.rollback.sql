-- Undo 0036: on Citus, tasks and task_deps go back to the coordinator (their rows with them);
-- on both, their primary keys ((id), (task_id, blocked_by_id)), tasks' foreign key to
-- task_lists and its notify triggers (0017) return, and so does 0013's task_view; this
-- migration's area function of ikigai_distribute() goes.
-- On Citus, this transaction both moves tables and replaces functions: its shard commands run
-- one at a time (as 0033's rollback).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
END
$$;

DROP FUNCTION IF EXISTS ikigai_task_prune(INTERVAL);
DROP FUNCTION IF EXISTS ikigai_task_sync(TEXT, TEXT[]);
DROP FUNCTION IF EXISTS ikigai_task_stats(TEXT);
DROP FUNCTION IF EXISTS ikigai_task_state(TEXT, TEXT, BOOLEAN);
DROP FUNCTION IF EXISTS ikigai_task_release(TEXT, TEXT, TEXT);
DROP FUNCTION IF EXISTS ikigai_task_claim(TEXT, TEXT, TEXT);
DROP FUNCTION IF EXISTS ikigai_task_upsert(TEXT, TEXT, TEXT, TEXT, TEXT, JSONB, TEXT, TEXT,
                                           BOOLEAN, BIGINT[]);
DROP FUNCTION IF EXISTS ikigai_list_tasks(TEXT, TEXT, TEXT, BOOLEAN, TEXT);
DROP FUNCTION IF EXISTS ikigai_task_rows(BIGINT, TEXT, TEXT, TEXT, BOOLEAN);

DO $$
DECLARE
    t TEXT;
    distributed BOOLEAN;
BEGIN
    -- task_deps' keys to tasks go first (undistribute_table refuses a table with foreign keys
    -- to or from another distributed table); they come back below.
    ALTER TABLE task_deps DROP CONSTRAINT IF EXISTS task_deps_task_fkey;
    ALTER TABLE task_deps DROP CONSTRAINT IF EXISTS task_deps_blocker_fkey;
    FOREACH t IN ARRAY ARRAY['task_deps', 'tasks'] LOOP
        -- (pg_dist_partition exists only with citus: read it through EXECUTE.)
        IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
            EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1)'
                INTO distributed USING t::regclass;
            IF distributed THEN
                EXECUTE format('SELECT undistribute_table(%L)', t);
            END IF;
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_constraint
               WHERE conrelid = 'task_deps'::regclass AND conname = 'task_deps_pkey'
                 AND cardinality(conkey) = 3) THEN
        ALTER TABLE task_deps DROP CONSTRAINT task_deps_pkey;
        ALTER TABLE task_deps ADD CONSTRAINT task_deps_pkey PRIMARY KEY (task_id, blocked_by_id);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_constraint
               WHERE conrelid = 'tasks'::regclass AND conname = 'tasks_pkey'
                 AND cardinality(conkey) = 2) THEN
        ALTER TABLE tasks DROP CONSTRAINT tasks_pkey;
        ALTER TABLE tasks ADD CONSTRAINT tasks_pkey PRIMARY KEY (id);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'tasks'::regclass AND conname = 'tasks_list_id_fkey') THEN
        ALTER TABLE tasks ADD CONSTRAINT tasks_list_id_fkey
            FOREIGN KEY (list_id) REFERENCES task_lists (id) ON DELETE CASCADE;
    END IF;
    ALTER TABLE task_deps ADD CONSTRAINT task_deps_task_fkey FOREIGN KEY (list_id, task_id)
        REFERENCES tasks (list_id, id) ON DELETE CASCADE;
    ALTER TABLE task_deps ADD CONSTRAINT task_deps_blocker_fkey
        FOREIGN KEY (list_id, blocked_by_id) REFERENCES tasks (list_id, id) ON DELETE CASCADE;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgrelid = 'tasks'::regclass AND tgname = 'tasks_notify_insert') THEN
        CREATE TRIGGER tasks_notify_insert
            AFTER INSERT ON tasks REFERENCING NEW TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION task_notify();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgrelid = 'tasks'::regclass AND tgname = 'tasks_notify_update') THEN
        CREATE TRIGGER tasks_notify_update
            AFTER UPDATE ON tasks REFERENCING NEW TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION task_notify();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgrelid = 'tasks'::regclass AND tgname = 'tasks_notify_delete') THEN
        CREATE TRIGGER tasks_notify_delete
            AFTER DELETE ON tasks REFERENCING OLD TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION task_notify();
    END IF;
END
$$;

-- 0013's view, as it was.
CREATE OR REPLACE VIEW task_view AS
SELECT t.id, l.list_id, t.external_id, t.subject, t.description, t.active_form, t.metadata,
       t.status, t.owner,
       ARRAY(SELECT b.external_id
             FROM task_deps AS d JOIN tasks AS b ON b.id = d.blocked_by_id
             WHERE d.task_id = t.id
             ORDER BY b.id) AS blocked_by,
       ARRAY(SELECT a.external_id
             FROM task_deps AS d JOIN tasks AS a ON a.id = d.task_id
             WHERE d.blocked_by_id = t.id
             ORDER BY a.id) AS blocks,
       t.created_at, t.updated_at, t.started_at, t.completed_at,
       t.list_id AS list_pk
FROM tasks AS t
JOIN task_lists AS l ON l.id = t.list_id;

-- This migration's area of the placement (ikigai_distribute(), 0033's, stays).
DROP FUNCTION IF EXISTS ikigai_distribute_0036_tasks();

UPDATE schema_metadata SET schema_version = 35 WHERE schema_version = 36;
