-- Task lists, tasks and their dependencies (ikigai_store/tasks.py; schema: migration 0013).
-- A task row is read through task_view (its list's public id, blocked_by and blocks as arrays
-- of external ids). Times come from ikigai_now(); order is by id. task_upsert writes the
-- task_complete activity of a first completion in the same statement (no outbox).
-- The statements that serve one list named by its public id are functions (migration 0036):
-- each finds the list's row, then reads or writes that list's tasks and edges with its id as a
-- value, every reference of tasks and task_deps filtered by it, so that on Citus (where tasks
-- and task_deps are distributed by list_id) each is routed to the list's shard; the ones that
-- change tasks send the ikigai_task wake-up themselves (on Citus the tasks' triggers are gone).
-- Every join of task_deps with tasks is on list_id too (an edge's tasks are of its list).

-- name: task_create_list(list_id, owner, watch_path)^
-- Create a list owned by an identity that is not retired. No row: the list id is taken, or
-- the owner is missing or retired (tasks.py explains).
WITH l AS (
    INSERT INTO task_lists (list_id, owner_id, watch_path)
    SELECT :list_id, i.id, :watch_path
    FROM identities AS i
    WHERE i.name = :owner AND i.retired_at IS NULL
    ON CONFLICT (list_id) DO NOTHING
    RETURNING *
)
SELECT l.id, l.list_id, CAST(:owner AS text) AS owner, l.watch_path, l.created_at,
       l.last_synced_at
FROM l;

-- name: task_get_list(list_id)^
-- One list, with its owner's name.
SELECT l.id, l.list_id, i.name AS owner, l.watch_path, l.created_at, l.last_synced_at
FROM task_lists AS l
JOIN identities AS i ON i.id = l.owner_id
WHERE l.list_id = :list_id;

-- name: task_all_lists(project_key)
-- Every list, in creation (id) order; :project_key not NULL: only the lists whose owner is of
-- that project or of none (a list belongs to its owner's project).
SELECT l.id, l.list_id, i.name AS owner, l.watch_path, l.created_at, l.last_synced_at
FROM task_lists AS l
JOIN identities AS i ON i.id = l.owner_id
WHERE CAST(:project_key AS text) IS NULL OR i.project_key IS NULL
   OR i.project_key = :project_key
ORDER BY l.id;

-- name: task_lock_list(list_id)^
-- Serialise the dependency changes of one list: lock its row until commit (FOR NO KEY UPDATE:
-- other dependency changers and sync_list wait; inserting tasks, whose foreign key check takes
-- FOR KEY SHARE, does not). Run it in a statement of its own before task_dependency_check, so
-- that check's snapshot, taken after the lock was granted, sees every committed edge.
SELECT id FROM task_lists WHERE list_id = :list_id FOR NO KEY UPDATE;

-- name: task_dependency_check(list_pk, external_id, blocked_by)^
-- Before a task's dependencies become :blocked_by (external ids in list :list_pk), under the
-- list's lock: the task's id (NULL: it does not exist yet), the blockers' ids, the external ids
-- that name no task of the list (missing), and the cycle the new edges would close (cycle: the
-- external ids from a new blocker back to the task, each blocked by the next; empty: none).
-- A cycle exists iff a new blocker already depends on the task, directly or not: "up" walks
-- the task's dependents (who is blocked by it, transitively) through task_deps_blocked_by_idx.
-- It terminates: each row of "up" is (a task, the task it was reached from), that is the start
-- or an edge of task_deps reversed; UNION drops rows already found, and there are finitely
-- many edges, so at most 1 + |edges of the list| rows are ever added. It does not walk past a
-- new blocker (the cycle is found there). "back" follows the reached-from pointers from the
-- first blocker found back to the task; it terminates because each step moves along an edge of
-- the stored graph, which has no cycle, and it is cut at |up| steps regardless.
-- Every reference of tasks and task_deps names the list (on Citus: routed to its shard).
WITH RECURSIVE me AS (
    SELECT id FROM tasks WHERE list_id = :list_pk AND external_id = :external_id
), wanted AS (
    SELECT DISTINCT w AS external_id FROM unnest(CAST(:blocked_by AS text[])) AS w
), found AS (
    SELECT t.id, t.external_id
    FROM tasks AS t
    JOIN wanted ON wanted.external_id = t.external_id
    WHERE t.list_id = :list_pk
), up (id, via) AS (
    SELECT id, CAST(NULL AS bigint) FROM me
    UNION
    SELECT d.task_id, up.id
    FROM up
    JOIN task_deps AS d ON d.list_id = :list_pk AND d.blocked_by_id = up.id
    WHERE up.id NOT IN (SELECT id FROM found)
), hit AS (
    SELECT found.id FROM found WHERE found.id IN (SELECT id FROM up) ORDER BY found.id LIMIT 1
), back (id, n) AS (
    SELECT id, 0 FROM hit
    UNION ALL
    SELECT (SELECT min(up.via) FROM up WHERE up.id = back.id), back.n + 1
    FROM back
    WHERE back.id <> (SELECT id FROM me) AND back.n < (SELECT count(*) FROM up)
)
SELECT (SELECT id FROM me) AS task_id,
       ARRAY(SELECT id FROM found ORDER BY id) AS blocker_ids,
       ARRAY(SELECT external_id FROM wanted
             WHERE external_id NOT IN (SELECT external_id FROM found)
             ORDER BY external_id) AS missing,
       ARRAY(SELECT t.external_id
             FROM back JOIN tasks AS t ON t.list_id = :list_pk AND t.id = back.id
             ORDER BY back.n) AS cycle;

-- name: task_upsert(list_id, external_id, subject, description, active_form, metadata, status, owner, replace_deps, blocker_ids)^
-- Create or update a task, with Subtrate's merge rules: a NULL argument leaves the stored
-- value (tasks.py turns empty text into NULL), metadata is merged into the stored object
-- (top-level keys of :metadata win), started_at is set the first time the status becomes
-- in_progress and completed_at the first time it becomes completed, updated_at every time.
-- With :replace_deps the task's dependencies become exactly :blocker_ids (checked by
-- task_dependency_check under the list's lock). inserted: the row is new (xmax = 0 on a tuple
-- this statement inserted; an ON CONFLICT update leaves the locker's xid there).
-- The first completion (completed_at set by this statement) of a task whose owner, after the
-- merge, names an identity that is not retired writes its task_complete activity in this
-- statement. Whether it is the first must be known of the row version this statement
-- updates, not of its snapshot (a racing completer may have committed since), and RETURNING
-- old.* needs PostgreSQL 18 (16 is supported): with :status completed, "pre" reads the
-- existing row FOR NO KEY UPDATE (the lock the update takes anyway), which under READ
-- COMMITTED waits for a concurrent writer and returns the newest committed version, locked
-- until commit; the ON CONFLICT update applies only to the row "pre" returned, so pre's
-- completed_at is the value being replaced. (Whether "pre" runs before the INSERT or when the
-- conflict's WHERE asks for it, the row it returns is that newest, locked version.) A row
-- "pre" did not see (a racing creator committed it after this statement's snapshot) is left
-- alone and no row comes back: tasks.py runs the statement again, whose snapshot sees it.
-- No row: the list does not exist, or that race (tasks.py tells them apart).
-- ikigai_task_upsert (migration 0036) does it in steps, each on one list's rows: "pre" is a
-- read of its own before the INSERT (a row committed after it is the race above).
SELECT * FROM ikigai_task_upsert(
    lname => :list_id, ext => :external_id, p_subject => :subject,
    p_description => :description, p_active_form => :active_form,
    p_metadata => CAST(:metadata AS jsonb), p_status => CAST(:status AS text),
    p_owner => :owner, replace_deps => :replace_deps,
    blocker_ids => CAST(:blocker_ids AS bigint[]));

-- name: task_get(list_id, external_id)^
-- One task of a list.
SELECT * FROM ikigai_list_tasks(:list_id, :external_id, NULL, false, NULL);

-- name: task_list_tasks(list_id, status)
-- A list's tasks in id order, all of them or those of one status.
SELECT * FROM ikigai_list_tasks(:list_id, NULL, :status, false, NULL);

-- name: task_owned(owner, status)
-- The tasks of every list held by one owner, all of them or those of one status, in id order.
-- Plan: a scan of tasks filtered on owner (a stop hook asks once per stop; tasks are pruned).
SELECT v.*
FROM task_view AS v
WHERE v.owner = :owner
  AND (CAST(:status AS text) IS NULL OR v.status = :status)
ORDER BY v.id;

-- name: task_available_in_list(list_id, project_key)
-- The tasks of a list anyone may claim now: pending, unowned, and every blocker completed or
-- deleted (a question about the blockers' rows, not a comparison of strings), in id order.
-- :project_key not NULL: none unless the list's owner is of that project or of none.
-- Plan: tasks_available_idx gives the list's pending unowned tasks in id order; for each,
-- the NOT EXISTS probes task_deps' primary key and the blockers' primary key. OFFSET 0 keeps
-- it a per-candidate probe: PostgreSQL would otherwise turn it into an anti-join, which it may
-- run by hashing every unfinished edge of the database, so the cost of a small list would
-- follow the size of the others.
SELECT * FROM ikigai_list_tasks(:list_id, NULL, NULL, true, :project_key);

-- name: task_available_all(project_key)
-- task_available_in_list over every list (:project_key not NULL: every list of that project or
-- of none), in id order (here the planner may hash: the question is about the whole database).
SELECT v.*
FROM task_view AS v
WHERE v.status = 'pending' AND v.owner IS NULL
  AND (CAST(:project_key AS text) IS NULL
       OR v.list_pk IN (SELECT l.id
                        FROM task_lists AS l JOIN identities AS i ON i.id = l.owner_id
                        WHERE i.project_key IS NULL OR i.project_key = :project_key))
  AND NOT EXISTS (SELECT 1
                  FROM task_deps AS d
                  JOIN tasks AS b ON b.list_id = d.list_id AND b.id = d.blocked_by_id
                  WHERE d.list_id = v.list_pk AND d.task_id = v.id
                    AND b.status NOT IN ('completed', 'deleted'))
ORDER BY v.id;

-- name: task_claim(list_id, external_id, owner)^
-- Claim a task in one guarded statement: only while it is pending, unowned (or already
-- assigned to :owner) and every blocker is completed or deleted; it becomes in_progress with
-- :owner, and started_at is set unless it was. Racing claimers queue on the row lock and
-- re-check the guard on the winner's committed row, so exactly one wins. No row: not
-- claimable (task_claim_refusal says why).
SELECT * FROM ikigai_task_claim(:list_id, :external_id, :owner);

-- name: task_claim_refusal(list_id, external_id)^
-- Why task_claim or task_release changed nothing (rare path): whether the list and the task
-- exist, the task's status and owner, and its blockers that are neither completed nor
-- deleted.
SELECT * FROM ikigai_task_state(:list_id, :external_id, false);

-- name: task_lock_task(list_id, external_id)^
-- Lock one task's row (held to commit) and read its status and owner: complete_task checks the
-- holder, then completes it in the same transaction, so no claim or release slips in between.
-- A missing list or task reads as NULLs (task_claim_refusal's shape).
SELECT * FROM ikigai_task_state(:list_id, :external_id, true);

-- name: task_release(list_id, external_id, owner)^
-- Give an in_progress task back, in one guarded statement: only while it is in_progress and
-- held by :owner; it becomes pending and unowned (claimable again once nothing blocks it).
-- started_at stays (the first start is history, as completed_at is). Of a release racing a
-- claim, an upsert or another release, the row lock orders them and the guard is re-checked
-- on the committed row, so a release never clears an owner it did not see. No row: not
-- releasable by :owner (task_claim_refusal says why).
SELECT * FROM ikigai_task_release(:list_id, :external_id, :owner);

-- name: task_stats_in_list(list_id)^
-- A list's counts in one pass: per status, available (what task_available_in_list returns)
-- and blocked (pending with a blocker neither completed nor deleted). list_pk NULL: no list.
-- s is MATERIALIZED so each pending task's blockers are probed once (inlined, the expression
-- would be evaluated once per FILTER that names it); OFFSET 0 keeps that a probe of the
-- task's edges rather than a hash of every edge of the database (see task_available_in_list).
SELECT * FROM ikigai_task_stats(:list_id);

-- name: task_stats_all()^
-- task_stats_in_list over every list.
WITH s AS MATERIALIZED (
    SELECT t.status, t.owner,
           CASE WHEN t.status = 'pending'
                THEN EXISTS (SELECT 1
                             FROM task_deps AS d
                             JOIN tasks AS b ON b.list_id = d.list_id AND b.id = d.blocked_by_id
                             WHERE d.list_id = t.list_id AND d.task_id = t.id
                               AND b.status NOT IN ('completed', 'deleted')
                             OFFSET 0)
                ELSE false
           END AS blocked
    FROM tasks AS t
)
SELECT count(*) AS total,
       count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'in_progress') AS in_progress,
       count(*) FILTER (WHERE status = 'completed') AS completed,
       count(*) FILTER (WHERE status = 'deleted') AS deleted,
       count(*) FILTER (WHERE status = 'pending' AND owner IS NULL AND NOT blocked)
           AS available,
       count(*) FILTER (WHERE blocked) AS blocked
FROM s;

-- name: task_sync_list(list_id, active)^
-- Mirror the source's list: every task of the list whose external id is not in :active and
-- that is not deleted yet becomes deleted; last_synced_at is set. list_pk NULL: no list.
SELECT * FROM ikigai_task_sync(:list_id, CAST(:active AS text[]));

-- name: task_prune(older_than)^
-- Delete the completed and deleted tasks last updated more than :older_than ago, with their
-- dependency edges (ON DELETE CASCADE), so a pruned blocker blocks nothing, as a completed or
-- deleted one did not.
SELECT ikigai_task_prune(CAST(:older_than AS interval)) AS deleted;
