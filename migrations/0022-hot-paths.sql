-- Hot paths (issue 22): what leases stop paying for, measured with
-- scripts/bench_activities.py.
-- - lease_key() computes the same 128-bit inet as 0014's, by inserting the colons with
--   overlay() instead of a regular expression (about 19 us a call, computed for every lease
--   insert): the values are identical, so leases_exclusion's index stays valid as it is.
-- - Leases no longer notify ikigai_lease from statement triggers (0017: a PL/pgSQL function
--   over a transition table, three runs per acquire + release, about 120 us): the statements
--   that write leases (queries/leases.sql) call pg_notify themselves, with the same channel
--   and payload (the holder ids), delivered on commit as before.
-- - acquire runs as one statement without a transaction around it: lease_refused() raises
--   the exclusion violation that undoes a refused replacement of the holder's own lease.
-- Idempotent.
-- depends: 0021-session-keys

CREATE OR REPLACE FUNCTION lease_key(resource TEXT) RETURNS inet
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT CAST(overlay(overlay(overlay(overlay(overlay(overlay(overlay(
                    lpad(to_hex(hashtextextended(resource, 0)), 16, '0')
                    || lpad(to_hex(hashtextextended(resource, 1)), 16, '0')
                PLACING ':' FROM 29 FOR 0) PLACING ':' FROM 25 FOR 0) PLACING ':' FROM 21 FOR 0)
                PLACING ':' FROM 17 FOR 0) PLACING ':' FROM 13 FOR 0) PLACING ':' FROM 9 FOR 0)
                PLACING ':' FROM 5 FOR 0) AS inet)
$fn$;

-- leases_acquire (queries/leases.sql) undoes a refused replacement of the holder's own lease
-- by raising this: an exclusion violation of leases_exclusion, like the refusal it is.
CREATE OR REPLACE FUNCTION lease_refused(resource TEXT) RETURNS boolean
LANGUAGE plpgsql
AS $fn$
BEGIN
    RAISE EXCEPTION 'a lease on % conflicts with another holder''s live lease', resource
        USING ERRCODE = 'exclusion_violation', CONSTRAINT = 'leases_exclusion';
END
$fn$;

DROP TRIGGER IF EXISTS leases_notify_insert ON leases;
DROP TRIGGER IF EXISTS leases_notify_update ON leases;
DROP TRIGGER IF EXISTS leases_notify_delete ON leases;
DROP FUNCTION IF EXISTS lease_notify();

UPDATE schema_metadata SET schema_version = 22 WHERE schema_version < 22;
