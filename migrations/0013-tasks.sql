-- Task lists, tasks and their dependencies (seed 004's task_lists and agent_tasks, on
-- PostgreSQL). Invariants the schema itself keeps:
-- - a list's public id (list_id) is unique and the list belongs to an identity, which is never
--   deleted; a task's external id is unique in its list (tasks.list_id and task_deps.list_id
--   hold the list's row id, task_lists.id, not its public list_id);
-- - a task's status is pending, in_progress, completed or deleted; its metadata is a JSON
--   object (never NULL: {} when none was given);
-- - dependencies are rows of task_deps, not JSON strings: "task_id is blocked by
--   blocked_by_id", both tasks of the same list (the composite foreign keys say so), never a
--   task blocked by itself; deleting a task deletes its edges in both directions, so a pruned
--   blocker blocks nothing (a completed or deleted blocker counts as done anyway).
-- What the schema cannot say, queries/tasks.sql and ikigai_store/tasks.py keep: the graph of
-- each list has no cycle (dependency changes of one list are serialised by a lock on its
-- task_lists row, and checked by a recursive walk before anything is written); a subject is
-- never empty (an upsert that would create a task without one is refused and rolled back).
-- Indexes: available_tasks walks tasks_available_idx (the pending, unowned tasks of a list in id
-- order) and probes task_deps' primary key (task_id, blocked_by_id) and the blocker's primary
-- key for each candidate; task_deps_blocked_by_idx serves "what does this task block" and the
-- cycle walk; tasks_done_idx serves prune.
-- depends: 0012-reviews-and-plans

CREATE TABLE IF NOT EXISTS task_lists (
    id             BIGSERIAL PRIMARY KEY,
    list_id        TEXT NOT NULL
                   CONSTRAINT task_lists_list_id_key UNIQUE
                   CONSTRAINT task_lists_list_id_check CHECK (list_id <> ''),
    owner_id       BIGINT NOT NULL REFERENCES identities (id),
    watch_path     TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    last_synced_at TIMESTAMPTZ
);

CREATE TABLE IF NOT EXISTS tasks (
    id           BIGSERIAL PRIMARY KEY,
    list_id      BIGINT NOT NULL REFERENCES task_lists (id) ON DELETE CASCADE,
    external_id  TEXT NOT NULL CONSTRAINT tasks_external_id_check CHECK (external_id <> ''),
    subject      TEXT NOT NULL,
    description  TEXT,
    active_form  TEXT,
    metadata     JSONB NOT NULL DEFAULT '{}'
                 CONSTRAINT tasks_metadata_check CHECK (jsonb_typeof(metadata) = 'object'),
    status       TEXT NOT NULL DEFAULT 'pending'
                 CONSTRAINT tasks_status_check
                 CHECK (status IN ('pending', 'in_progress', 'completed', 'deleted')),
    owner        TEXT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    started_at   TIMESTAMPTZ,
    completed_at TIMESTAMPTZ,
    CONSTRAINT tasks_external_id_key UNIQUE (list_id, external_id),
    -- The target of task_deps' composite foreign keys; also a list's tasks in id order.
    CONSTRAINT tasks_list_id_id_key UNIQUE (list_id, id)
);
CREATE INDEX IF NOT EXISTS tasks_available_idx ON tasks (list_id, id)
    WHERE status = 'pending' AND owner IS NULL;
CREATE INDEX IF NOT EXISTS tasks_done_idx ON tasks (updated_at)
    WHERE status IN ('completed', 'deleted');

CREATE TABLE IF NOT EXISTS task_deps (
    list_id       BIGINT NOT NULL,
    task_id       BIGINT NOT NULL,
    blocked_by_id BIGINT NOT NULL,
    CONSTRAINT task_deps_pkey PRIMARY KEY (task_id, blocked_by_id),
    CONSTRAINT task_deps_task_fkey FOREIGN KEY (list_id, task_id)
        REFERENCES tasks (list_id, id) ON DELETE CASCADE,
    CONSTRAINT task_deps_blocker_fkey FOREIGN KEY (list_id, blocked_by_id)
        REFERENCES tasks (list_id, id) ON DELETE CASCADE,
    CONSTRAINT task_deps_self_check CHECK (task_id <> blocked_by_id)
);
CREATE INDEX IF NOT EXISTS task_deps_blocked_by_idx ON task_deps (blocked_by_id, task_id);

-- A task as the API returns it: its list's public id, and the external ids of the tasks it is
-- blocked by and of those it blocks (each in id order). list_pk is tasks.list_id, for filters.
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

UPDATE schema_metadata SET schema_version = 13 WHERE schema_version < 13;
