-- The activity feed (migration 0011): what each identity did, newest first by id. Rows are
-- never updated; prune_activities deletes by age. Other areas insert their activities in the
-- same statement or transaction as the change they report (see reviews.sql, tasks.sql).

-- name: activities_record(identity, type, description, metadata)^
-- Record one activity of an identity that exists and is not retired, and return it: one
-- INSERT ... VALUES whose identity id is ikigai_active_identity() (migration 0040; on Citus
-- the coordinator evaluates it, then sends the row to the identity's shard as one command).
-- It raises, and nothing is inserted, when the identity is missing (IK404) or retired (IK400).
-- The type is checked by the CHECK.
INSERT INTO activities AS a (identity_id, type, description, metadata)
VALUES (ikigai_active_identity(CAST(:identity AS text), 'it records no activity'),
        CAST(:type AS text), CAST(:description AS text), CAST(:metadata AS jsonb))
RETURNING a.id, CAST(:identity AS text) AS identity, a.type, a.description, a.metadata,
          a.created_at;

-- name: activities_feed(since, before, limit)
-- The whole feed, newest first by id, at most :limit rows: created at or after :since (NULL:
-- any time), with id below :before (NULL: from the newest; keyset pagination). A backward
-- walk of the primary key (or, for a short :since window, of activities_created_idx).
SELECT a.id, i.name AS identity, a.type, a.description, a.metadata, a.created_at
FROM activities AS a
JOIN identities AS i ON i.id = a.identity_id
WHERE (CAST(:since AS timestamptz) IS NULL OR a.created_at >= :since)
  AND (CAST(:before AS bigint) IS NULL OR a.id < :before)
ORDER BY a.id DESC
LIMIT :limit;

-- name: activities_feed_identity(identity, since, before, limit)
-- One identity's feed, as activities_feed. The row comparisons (the identity a scalar, so
-- they are index conditions) bound a range of activities_identity_idx and the order is that
-- index's, so it is walked backwards from :before and stops after :limit rows, however rare
-- the identity (an equality on identity_id would let the planner walk the primary key and
-- filter instead).
SELECT id, identity, type, description, metadata, created_at
FROM ikigai_identity_feed(:identity, NULL, CAST(:since AS timestamptz), CAST(:before AS bigint),
                          CAST(:limit AS bigint));

-- name: activities_feed_identity_type(identity, type, since, before, limit)
-- One identity's activities of one type, as activities_feed_identity, on
-- activities_identity_type_idx.
SELECT id, identity, type, description, metadata, created_at
FROM ikigai_identity_feed(:identity, CAST(:type AS text), CAST(:since AS timestamptz),
                          CAST(:before AS bigint), CAST(:limit AS bigint));

-- name: activities_feed_type(type, since, before, limit)
-- The activities of one type, as activities_feed_identity, on activities_type_idx.
SELECT a.id, i.name AS identity, a.type, a.description, a.metadata, a.created_at
FROM activities AS a
JOIN identities AS i ON i.id = a.identity_id
WHERE (a.type, a.id) < (CAST(:type AS text), COALESCE(CAST(:before AS bigint), 9223372036854775807))
  AND (a.type, a.id) > (CAST(:type AS text), 0)
  AND (CAST(:since AS timestamptz) IS NULL OR a.created_at >= :since)
ORDER BY a.type DESC, a.id DESC
LIMIT :limit;

-- name: activities_identity_state(identity)^
-- Whether an identity exists and is retired (why activities_record wrote nothing; whether an
-- empty feed's identity exists). No row: no such identity.
SELECT retired_at IS NOT NULL AS retired FROM identities WHERE name = :identity;

-- name: activities_prune(older_than)^
-- Delete the activities created more than :older_than ago (created_at < now - older_than);
-- returns how many.
-- The cutoff is computed once, on the coordinator (on Citus a multi-shard delete cannot
-- evaluate ikigai_now() on the shards).
WITH cutoff AS MATERIALIZED (
    SELECT ikigai_now() - CAST(:older_than AS interval) AS at
),
gone AS (
    DELETE FROM activities
    WHERE created_at < (SELECT at FROM cutoff)
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone;
