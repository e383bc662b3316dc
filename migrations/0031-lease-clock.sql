-- The lease clock (issue 38): a grant's period starts when the granting statement reads the
-- table, not when it was sent.
-- - ikigai_clock(): the setting ikigai.now when tests set it (as ikigai_now()), else
--   clock_timestamp(), the time it is called; VOLATILE, so each statement that reads it
--   evaluates it once, in a subquery, after its snapshot was taken.
-- Before, a grant started at ikigai_now() (statement_timestamp(): when the statement arrived).
-- A grant slowed after that (a busy server, a wait on a racing writer) could pass the
-- exclusion check after another holder's lease ended and was deleted (swept once expired,
-- released, force-released) and still be stored with a start before that lease's end: the
-- recorded periods of two exclusive holders overlapped. queries/leases.sql now starts a grant
-- at ikigai_clock(), read once after the snapshot, and refuses it while the snapshot shows
-- another holder's lease that conflicts with the new period (what the exclusion constraint
-- would have refused had that lease not been deleted meanwhile): a lease deleted before the
-- snapshot ended before the grant's start, one deleted after it is still seen. Exclusive
-- holders' periods, each ending when its lease expires or is deleted, never overlap.
-- Idempotent.
-- depends: 0030-citus-distribution

CREATE OR REPLACE FUNCTION ikigai_clock() RETURNS timestamptz
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $fn$
    SELECT COALESCE(CAST(NULLIF(current_setting('ikigai.now', true), '') AS timestamptz),
                    clock_timestamp())
$fn$;

UPDATE schema_metadata SET schema_version = 31 WHERE schema_version < 31;
