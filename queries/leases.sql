-- Leases (migration 0014): a resource held by one identity exclusively, or by several shared,
-- until a time. The exclusion constraint leases_exclusion is what refuses a second holder
-- (whatever the code does); these statements only ask for grants, and a lease is live while
-- expires_at > ikigai_now().
-- Exclusive holders' periods (each ending when its lease expires or is deleted) never
-- overlap, also when the statements race. The exclusion constraint sees only the leases still
-- there when it checks, and a statement's snapshot only what committed before it began, so
-- every statement that writes a resource's leases first takes that resource's lock,
-- pg_advisory_xact_lock(hashtextextended('lease:' || resource, 7)), held until it commits:
-- grants, renewals, releases and force-releases wait for it; a sweep skips the leases whose
-- resource is locked (pg_try_advisory_xact_lock). A grant's period starts at ikigai_clock()
-- (migration 0031), read once the lock is held, and the grant is refused while its snapshot
-- shows another holder's lease conflicting with that period. So, for every other lease on the
-- resource: one that ended by a write (released, force-released, replaced, swept) before the
-- lock was taken ended before the grant's start; no write can end one while the grant holds
-- the lock; and one renewed or granted after the snapshot was taken (committed before the lock)
-- is still there when the exclusion constraint checks. Before (issue 38), a grant held up
-- between its snapshot and its check could miss a lease renewed meanwhile and then released,
-- or granted and released meanwhile, and record a start before that lease's end.

-- name: leases_grant(holder, resource, exclusive, ttl)^
-- acquire's fast path, one INSERT: grant :holder (existing, not retired) a lease on a
-- :resource it holds no lease on (live or expired), for :ttl from now (read under the
-- resource's lock, see the top of this file), unless another holder's
-- live lease conflicts (in the snapshot, or leases_exclusion; ON CONFLICT DO NOTHING waits for
-- a racing grant to commit or roll back first). Notifies ikigai_lease (the holder) on commit. No row: refused,
-- or no such holder (leases_refusal says which), or neither: it holds a lease there, which
-- leases_acquire replaces. No CTE, no sweep: the cheapest statement that keeps the invariants
-- (issue 22). One probe of the resource's leases tests both the holder's own and, in the
-- snapshot, another holder's conflicting with the period (see the top of this file). The probe
-- is an ordered LIMIT 1 so that it is a plain index scan of leases_resource_idx: that marks the
-- entries of deleted leases dead, and later probes step over them (a bitmap scan, which the
-- planner picks for NOT EXISTS, never does: on a resource acquired and released in a loop each
-- probe visited every dead lease's heap page, issue 38).
INSERT INTO leases (resource, holder_id, exclusive, acquired_at, expires_at)
SELECT :resource, i.id, :exclusive, c.t, c.t + CAST(:ttl AS interval)
FROM identities AS i,
     (SELECT ikigai_clock() AS t
      WHERE pg_advisory_xact_lock(hashtextextended('lease:' || :resource, 7)) IS NOT NULL) AS c
WHERE i.name = :holder AND i.retired_at IS NULL
  AND (SELECT l.id FROM leases AS l
       WHERE l.resource = :resource
         AND (l.holder_id = i.id OR (l.expires_at > c.t AND (l.exclusive OR :exclusive)))
       ORDER BY l.resource, l.id
       LIMIT 1) IS NULL
ON CONFLICT DO NOTHING
RETURNING id, resource, CAST(:holder AS text) AS holder, exclusive, CAST(token AS text) AS token,
          acquired_at, expires_at, pg_notify('ikigai_lease', CAST(holder_id AS text)) AS notified;

-- name: leases_acquire(holder, resource, exclusive, ttl)^
-- Grant :holder (existing, not retired) a lease on :resource for :ttl from now, in one
-- statement, atomic by itself (no transaction around it), under the resource's lock (the
-- clock CTE takes it first; see the top of this file): the holder's own leases on the
-- resource (any mode) are replaced, up to 32 expired leases anywhere are swept (not those of a
-- resource another statement holds the lock of), and the
-- insert is refused when another holder's live lease conflicts: in the snapshot (where the
-- swept leases, expired, conflict with nothing), or by leases_exclusion (ON CONFLICT DO
-- NOTHING: after waiting for a racing grant to commit or roll back; a plain insert would
-- deadlock with it). acquire runs this for one call in 8 (leases.SWEEP_EVERY), and when
-- leases_grant granted nothing with nothing in the way: as a call adds at most one lease, the
-- sweep keeps up, and no cleanup job is needed. A refusal that replaced one of the holder's
-- own leases raises lease_refused() (exclusion_violation, migration 0022), which undoes the
-- whole statement; any other refusal returns no row (what it swept stays swept: expired
-- leases). One row of mine's count, joined with the grant if any, decides which (no second
-- branch re-reading the CTEs); the sweep deletes = ANY of an ARRAY of ids (no semi-join to
-- hash). The scalar subqueries make the deletes run before the insert checks the
-- constraint (rows deleted by this statement conflict with nothing). A grant notifies
-- ikigai_lease on commit: the holder, and each swept lease's holder. No row: refused, or no
-- such holder (leases_refusal says which).
WITH clock AS (
    SELECT ikigai_clock() AS t
    WHERE pg_advisory_xact_lock(hashtextextended('lease:' || :resource, 7)) IS NOT NULL
), me AS (
    SELECT id FROM identities WHERE name = :holder AND retired_at IS NULL
), mine AS (
    DELETE FROM leases
    WHERE resource = :resource AND holder_id = (SELECT id FROM me)
      AND (SELECT t FROM clock) IS NOT NULL
    RETURNING id
), swept AS (
    DELETE FROM leases
    WHERE id = ANY (ARRAY(SELECT x.id FROM leases AS x
                          WHERE x.expires_at <= ikigai_now()
                            AND (x.resource <> :resource
                                 OR x.holder_id IS DISTINCT FROM (SELECT id FROM me))
                            AND (SELECT t FROM clock) IS NOT NULL
                            AND pg_try_advisory_xact_lock(
                                    hashtextextended('lease:' || x.resource, 7))
                          ORDER BY x.expires_at
                          LIMIT 32
                          FOR UPDATE SKIP LOCKED))
    RETURNING holder_id
), granted AS (
    INSERT INTO leases (resource, holder_id, exclusive, acquired_at, expires_at)
    SELECT :resource, me.id, :exclusive, c.t, c.t + CAST(:ttl AS interval)
    FROM me, clock AS c
    WHERE (SELECT count(*) FROM mine) >= 0 AND (SELECT count(*) FROM swept) >= 0
      AND (SELECT l.id FROM leases AS l
           WHERE l.resource = :resource AND l.holder_id <> me.id
             AND l.expires_at > c.t AND (l.exclusive OR :exclusive)
           ORDER BY l.resource, l.id
           LIMIT 1) IS NULL
    ON CONFLICT DO NOTHING
    RETURNING id, resource, holder_id, exclusive, token, acquired_at, expires_at
)
SELECT g.id, g.resource, CAST(:holder AS text) AS holder, g.exclusive,
       CAST(g.token AS text) AS token, g.acquired_at, g.expires_at
FROM (SELECT count(*) AS n FROM mine) AS m
LEFT JOIN granted AS g ON true
WHERE CASE WHEN g.id IS NOT NULL
           THEN pg_notify('ikigai_lease', CAST(g.holder_id AS text)) IS NOT NULL
                AND (SELECT count(pg_notify('ikigai_lease', CAST(holder_id AS text)))
                     FROM swept) >= 0
           WHEN m.n > 0 THEN lease_refused(:resource)
           ELSE false END;

-- name: leases_refusal(holder, resource, exclusive)
-- Why leases_acquire granted nothing (rare path): the holder's state ('active', 'retired' or
-- NULL: missing) on every row, and the live leases of other holders that the requested mode
-- conflicts with (every live one for an exclusive request, live exclusive ones for a shared
-- request), longest-lived first; one row of NULL lease columns when there is none.
SELECT (SELECT CASE WHEN retired_at IS NULL THEN 'active' ELSE 'retired' END
        FROM identities WHERE name = :holder) AS holder_state,
       b.id, b.resource, b.holder, b.exclusive, b.token, b.acquired_at, b.expires_at
FROM (SELECT 1) AS one
LEFT JOIN (
    SELECT l.id, l.resource, i.name AS holder, l.exclusive, CAST(l.token AS text) AS token,
           l.acquired_at, l.expires_at
    FROM leases AS l
    JOIN identities AS i ON i.id = l.holder_id
    WHERE l.resource = :resource AND l.expires_at > ikigai_now() AND i.name <> :holder
      AND (l.exclusive OR :exclusive)
) AS b ON true
ORDER BY b.expires_at DESC, b.id;

-- name: leases_renew(resource, token, ttl)^
-- Move a live lease's end to :ttl from now, only with its token; it keeps its start, so a
-- lease that expired is never renewed (and if someone took the resource meanwhile, the
-- renewed period would overlap theirs: leases_exclusion refuses it). Under the resource's
-- lock, taken before the row is read (see the top of this file). Notifies ikigai_lease
-- (the holder) on commit. No row: not live.
WITH renewed AS (
    UPDATE leases AS l
    SET expires_at = ikigai_now() + CAST(:ttl AS interval)
    FROM identities AS i
    WHERE l.token = CAST(:token AS uuid) AND (l.resource = :resource) IS TRUE
      AND l.expires_at > ikigai_now() AND i.id = l.holder_id
      AND (SELECT pg_advisory_xact_lock(hashtextextended('lease:' || :resource, 7)) IS NOT NULL)
    RETURNING l.id, l.resource, l.holder_id, i.name AS holder, l.exclusive,
              CAST(l.token AS text) AS token, l.acquired_at, l.expires_at
)
SELECT id, resource, holder, exclusive, token, acquired_at, expires_at
FROM renewed
WHERE pg_notify('ikigai_lease', CAST(holder_id AS text)) IS NOT NULL;

-- name: leases_by_token(resource, token)^
-- The lease with this token on this resource, live or expired (why renew refused); no row
-- when it was released, force-released, replaced or swept.
SELECT l.id, l.resource, i.name AS holder, l.exclusive, CAST(l.token AS text) AS token,
       l.acquired_at, l.expires_at, l.expires_at > ikigai_now() AS live
FROM leases AS l
JOIN identities AS i ON i.id = l.holder_id
WHERE l.token = CAST(:token AS uuid) AND (l.resource = :resource) IS TRUE;

-- name: leases_release(resource, token)^
-- End a lease, only with its token, under the resource's lock (see the top of this file);
-- returns whether it was live (first column). Notifies
-- ikigai_lease (the holder) on commit: RETURNING is evaluated for the deleted row (no CTE to
-- scan, issue 38). No row: already gone. The row is found by the token's unique index: the
-- resource test is written "IS TRUE" so that the planner cannot pick leases_resource_idx, where
-- a busy resource's churn leaves dead entries (every statement that looks a lease up by its
-- token does the same).
DELETE FROM leases
WHERE token = CAST(:token AS uuid) AND (resource = :resource) IS TRUE
  AND (SELECT pg_advisory_xact_lock(hashtextextended('lease:' || :resource, 7)) IS NOT NULL)
RETURNING expires_at > ikigai_now() AS live,
          pg_notify('ikigai_lease', CAST(holder_id AS text)) AS notified;

-- name: leases_force_release(resource)^
-- End every lease on :resource, whoever holds it (an administrator's call), under the
-- resource's lock (see the top of this file); returns how many
-- of them were live. Notifies ikigai_lease (their holders) on commit when there were any.
WITH gone AS (
    DELETE FROM leases
    WHERE resource = :resource
      AND (SELECT pg_advisory_xact_lock(hashtextextended('lease:' || :resource, 7)) IS NOT NULL)
    RETURNING holder_id, expires_at > ikigai_now() AS live
)
SELECT count(*) FILTER (WHERE live) AS ended
FROM gone
WHERE (SELECT count(ikigai_notify_ids('ikigai_lease', ids))
       FROM (SELECT string_agg(DISTINCT CAST(holder_id AS text), ',') AS ids FROM gone) AS n) >= 0;

-- name: leases_held(prefix, holder)
-- Live leases whose resource starts with :prefix (a range scan of leases_resource_idx: the
-- column sorts bytewise), of one holder when :holder is not NULL, by resource then id.
SELECT l.id, l.resource, i.name AS holder, l.exclusive, CAST(l.token AS text) AS token,
       l.acquired_at, l.expires_at
FROM leases AS l
JOIN identities AS i ON i.id = l.holder_id
WHERE starts_with(l.resource, :prefix) AND l.expires_at > ikigai_now()
  AND (CAST(:holder AS text) IS NULL OR i.name = :holder)
ORDER BY l.resource, l.id;

-- name: leases_identity_exists(holder)^
-- One row when the identity exists (an empty held() of an unknown holder is NotFound).
SELECT 1 AS found FROM identities WHERE name = :holder;
