-- Undo 0022: lease_refused() goes, the lease triggers of 0017 and its lease_key() come back
-- (the same values).
DROP FUNCTION IF EXISTS lease_refused(TEXT);

CREATE OR REPLACE FUNCTION lease_notify() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM ikigai_notify_ids('ikigai_lease',
                              (SELECT string_agg(DISTINCT holder_id::text, ',') FROM changed));
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS leases_notify_insert ON leases;
CREATE TRIGGER leases_notify_insert
    AFTER INSERT ON leases REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lease_notify();
DROP TRIGGER IF EXISTS leases_notify_update ON leases;
CREATE TRIGGER leases_notify_update
    AFTER UPDATE ON leases REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lease_notify();
DROP TRIGGER IF EXISTS leases_notify_delete ON leases;
CREATE TRIGGER leases_notify_delete
    AFTER DELETE ON leases REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lease_notify();

CREATE OR REPLACE FUNCTION lease_key(resource TEXT) RETURNS inet
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT CAST(regexp_replace(
               lpad(to_hex(hashtextextended(resource, 0)), 16, '0')
               || lpad(to_hex(hashtextextended(resource, 1)), 16, '0'),
               '(.{4})(?!$)', '\1:', 'g') AS inet)
$fn$;

UPDATE schema_metadata SET schema_version = 21 WHERE schema_version = 22;
