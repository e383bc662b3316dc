-- Undo 0038: on Citus, review_iterations and review_issues go back to the coordinator (their
-- rows with them); on both, their primary keys ((id)) and review_iterations' foreign keys to
-- reviews and identities return, and so does 0036's ikigai_distribute(). queries/reviews.sql
-- of 0037 held these statements itself.
-- On Citus, this transaction both moves tables and replaces functions: its shard commands run
-- one at a time (as 0036's rollback).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
END
$$;

DROP FUNCTION IF EXISTS ikigai_review_resolve_issue(BIGINT, TEXT, INTEGER);
DROP FUNCTION IF EXISTS ikigai_review_issue(BIGINT);
DROP FUNCTION IF EXISTS ikigai_review_record_iteration(UUID, TEXT, TEXT, TEXT, TEXT, JSONB,
                                                       INTEGER, BIGINT, BIGINT,
                                                       DOUBLE PRECISION, TEXT, JSONB, TEXT,
                                                       TEXT, TEXT, TEXT, TEXT);
DROP FUNCTION IF EXISTS ikigai_review_rows(UUID, INTEGER);

DO $$
DECLARE
    t TEXT;
    distributed BOOLEAN;
BEGIN
    -- review_issues' keys to review_iterations go first (undistribute_table refuses a table
    -- with foreign keys to or from another distributed table); they come back below.
    ALTER TABLE review_issues DROP CONSTRAINT IF EXISTS review_issues_iteration_fkey;
    ALTER TABLE review_issues DROP CONSTRAINT IF EXISTS review_issues_resolved_fkey;
    FOREACH t IN ARRAY ARRAY['review_issues', 'review_iterations'] LOOP
        -- (pg_dist_partition exists only with citus: read it through EXECUTE.)
        IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
            EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1)'
                INTO distributed USING t::regclass;
            IF distributed THEN
                EXECUTE format('SELECT undistribute_table(%L)', t);
            END IF;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = t::regclass AND conname = t || '_pkey'
                     AND cardinality(conkey) = 2) THEN
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (id)', t, t || '_pkey');
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'review_iterations'::regclass
                     AND conname = 'review_iterations_review_id_fkey') THEN
        ALTER TABLE review_iterations ADD CONSTRAINT review_iterations_review_id_fkey
            FOREIGN KEY (review_id) REFERENCES reviews (review_id);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'review_iterations'::regclass
                     AND conname = 'review_iterations_reviewer_id_fkey') THEN
        ALTER TABLE review_iterations ADD CONSTRAINT review_iterations_reviewer_id_fkey
            FOREIGN KEY (reviewer_id) REFERENCES identities (id);
    END IF;
    ALTER TABLE review_issues ADD CONSTRAINT review_issues_iteration_fkey
        FOREIGN KEY (review_id, iteration_num)
        REFERENCES review_iterations (review_id, iteration_num);
    ALTER TABLE review_issues ADD CONSTRAINT review_issues_resolved_fkey
        FOREIGN KEY (review_id, resolved_in_iteration)
        REFERENCES review_iterations (review_id, iteration_num);
END
$$;

-- 0036's placement, as it was.
CREATE OR REPLACE FUNCTION ikigai_distribute()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    fk RECORD;
    t TEXT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'ikigai_distribute: the citus extension is not created in this database'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    -- One distributor at a time (a second waits, then finds the tables placed).
    PERFORM pg_advisory_xact_lock(hashtext('ikigai_distribute'));
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                   WHERE logicalrelid = 'messages'::regclass AND partmethod = 'h') THEN
        FOR fk IN SELECT conname FROM pg_constraint
                  WHERE conrelid = 'messages'::regclass AND contype = 'f' LOOP
            EXECUTE format('ALTER TABLE messages DROP CONSTRAINT %I', fk.conname);
        END LOOP;
        DROP TRIGGER IF EXISTS messages_search_vector ON messages;
        IF NOT EXISTS (SELECT 1 FROM pg_attribute
                       WHERE attrelid = 'messages'::regclass AND attname = 'search_vector'
                         AND attgenerated = 's') THEN
            DROP INDEX IF EXISTS idx_messages_search_vector;
            ALTER TABLE messages DROP COLUMN IF EXISTS search_vector;
            ALTER TABLE messages ADD COLUMN search_vector tsvector
                GENERATED ALWAYS AS (to_tsvector('english', left(content, 100000))) STORED;
            CREATE INDEX idx_messages_search_vector ON messages USING gin (search_vector);
        END IF;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'messages'::regclass AND conname = 'messages_pkey'
                     AND cardinality(conkey) = 1) THEN
            ALTER TABLE messages DROP CONSTRAINT messages_pkey;
            ALTER TABLE messages ADD CONSTRAINT messages_pkey PRIMARY KEY (session_id, id);
        END IF;
        PERFORM create_distributed_table('messages', 'session_id');
        relation := 'messages';
        made := 'distributed by session_id';
        RETURN NEXT;
    END IF;
    -- A thread's checkpoint rows, colocated with its session's events.
    FOREACH t IN ARRAY ARRAY['langgraph_checkpoints', 'langgraph_blobs', 'langgraph_writes'] LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_dist_partition
                              WHERE logicalrelid = t::regclass AND partmethod = 'h');
        FOR fk IN SELECT conname FROM pg_constraint
                  WHERE conrelid = t::regclass AND contype = 'f' LOOP
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, fk.conname);
        END LOOP;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = t::regclass AND conname = t || '_pkey'
                     AND cardinality(conkey) = 1) THEN
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (session_id, id)',
                           t, t || '_pkey');
        END IF;
        PERFORM create_distributed_table(t, 'session_id', colocate_with => 'messages');
        relation := t;
        made := 'distributed by session_id, colocated with messages';
        RETURN NEXT;
    END LOOP;
    -- An identity's activities and agent summaries, colocated with each other (a group of
    -- their own: identity ids and session ids are unrelated).
    FOREACH t IN ARRAY ARRAY['activities', 'agent_summaries'] LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_dist_partition
                              WHERE logicalrelid = t::regclass AND partmethod = 'h');
        FOR fk IN SELECT conname FROM pg_constraint
                  WHERE conrelid = t::regclass AND contype = 'f' LOOP
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, fk.conname);
        END LOOP;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = t::regclass AND conname = t || '_pkey'
                     AND cardinality(conkey) = 1) THEN
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (identity_id, id)',
                           t, t || '_pkey');
        END IF;
        IF t = 'activities' THEN
            PERFORM create_distributed_table(t, 'identity_id', colocate_with => 'none');
            made := 'distributed by identity_id';
        ELSE
            PERFORM create_distributed_table(t, 'identity_id', colocate_with => 'activities');
            made := 'distributed by identity_id, colocated with activities';
        END IF;
        relation := t;
        RETURN NEXT;
    END LOOP;
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

UPDATE schema_metadata SET schema_version = 37 WHERE schema_version = 38;
