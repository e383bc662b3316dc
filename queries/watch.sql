-- What `ikigai-store watch` reads and writes (ikigai_store/watch.py; migration 0017): the
-- things that concern one identity now (unread mail, tasks it may claim, waited resources that
-- became free), when to look again without a notification, and what its watcher printed.

-- name: watch_target(identity)^
-- The identity's id and state ('active', 'retired'); no row when it does not exist.
SELECT id, CASE WHEN retired_at IS NULL THEN 'active' ELSE 'retired' END AS state
FROM identities
WHERE name = :identity;

-- name: watch_lock(identity)^
-- Serialise the watchers starting for one identity (transaction-scoped advisory lock), so two
-- starting at once cannot both find the identity unwatched.
SELECT pg_advisory_xact_lock(hashtextextended('watch:' || :identity, 7)) IS NOT NULL AS locked;

-- name: watch_seen(identity_id)^
-- What the identity's watcher printed (and is still pending); no row before its first watch.
SELECT mail, tasks FROM watchers WHERE identity_id = :identity_id;

-- name: watch_save(identity_id, mail, tasks, freed)!
-- Keep what the watcher printed; forget the waits whose freed resource it printed.
WITH forgotten AS (
    DELETE FROM lease_waits
    WHERE identity_id = :identity_id AND resource = ANY(CAST(:freed AS text[]))
)
INSERT INTO watchers (identity_id, mail, tasks)
VALUES (:identity_id, CAST(:mail AS bigint[]), CAST(:tasks AS bigint[]))
ON CONFLICT (identity_id) DO UPDATE
SET mail = EXCLUDED.mail, tasks = EXCLUDED.tasks, updated_at = ikigai_now();

-- name: watch_mail(identity_id)
-- The identity's unread mail (passed snoozes included), oldest first, from the partial index
-- mail_recipients_pending_idx.
SELECT m.id, m.thread_id, s.name AS sender, m.subject, m.priority, m.metadata, m.created_at
FROM mail_recipients AS r
JOIN mail AS m ON m.id = r.mail_id
JOIN identities AS s ON s.id = m.sender_id
WHERE r.identity_id = :identity_id AND r.state IN ('unread', 'snoozed')
  AND (r.state = 'unread' OR r.snoozed_until <= ikigai_now())
ORDER BY r.mail_id;

-- name: watch_tasks(identity_id)
-- The tasks the identity may claim (pending, unowned, every blocker done: task_available_in_list)
-- in the task lists of its project and in those of no project, which are shared (as
-- tasks.available with its project_key: lists whose owner has its project_key or none; its
-- own lists are either), in id order. Edges join their tasks on list_id too (on Citus, where
-- tasks and task_deps are distributed by it, this asks every shard: migration 0036).
SELECT v.id, v.list_id, v.external_id, v.subject
FROM task_view AS v
WHERE v.list_pk IN (SELECT l.id
                    FROM task_lists AS l
                    JOIN identities AS o ON o.id = l.owner_id
                    JOIN identities AS me ON me.id = :identity_id
                    WHERE o.project_key IS NULL OR o.project_key = me.project_key)
  AND v.status = 'pending' AND v.owner IS NULL
  AND NOT EXISTS (SELECT 1
                  FROM task_deps AS d
                  JOIN tasks AS b ON b.list_id = d.list_id AND b.id = d.blocked_by_id
                  WHERE d.list_id = v.list_pk AND d.task_id = v.id
                    AND b.status NOT IN ('completed', 'deleted')
                  OFFSET 0)
ORDER BY v.id;

-- name: watch_freed(identity_id)
-- The resources the identity waits for that no other identity holds a live lease on any more,
-- oldest wait first.
SELECT w.resource
FROM lease_waits AS w
WHERE w.identity_id = :identity_id
  AND NOT EXISTS (SELECT 1 FROM leases AS l
                  WHERE l.resource = w.resource AND l.holder_id <> w.identity_id
                    AND l.expires_at > ikigai_now())
ORDER BY w.created_at, w.resource;

-- name: watch_next(identity_id)^
-- Without a notification, when to look again: the seconds until the identity's next snooze
-- wakes or the next lease it waits behind expires (NULL: neither), and the holders of those
-- leases (their lease changes notify ikigai_lease with their ids).
WITH blocking AS (
    SELECT l.holder_id, l.expires_at
    FROM lease_waits AS w
    JOIN leases AS l ON l.resource = w.resource AND l.holder_id <> w.identity_id
    WHERE w.identity_id = :identity_id AND l.expires_at > ikigai_now()
)
SELECT EXTRACT(EPOCH FROM least(
           (SELECT min(r.snoozed_until) FROM mail_recipients AS r
            WHERE r.identity_id = :identity_id AND r.state = 'snoozed'),
           (SELECT min(expires_at) FROM blocking)) - ikigai_now()) AS next_wake,
       ARRAY(SELECT DISTINCT holder_id FROM blocking ORDER BY holder_id) AS holders;

-- name: lease_wait(waiter, resource)^
-- Record that :waiter (existing, not retired) waits for :resource (idempotent); no row when it
-- does not exist or is retired.
INSERT INTO lease_waits (identity_id, resource)
SELECT id, :resource FROM identities WHERE name = :waiter AND retired_at IS NULL
ON CONFLICT (identity_id, resource) DO UPDATE SET created_at = lease_waits.created_at
RETURNING resource;
