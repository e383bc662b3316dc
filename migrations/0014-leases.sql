-- Leases (beyond seed 004): agents reserve a resource (a file, a build slot, a port) for a
-- while, exclusively or shared. mcp_agent_mail's advisory reservations were granted twice under
-- races; these are enforced by the schema itself. Invariants the schema keeps:
-- - on one resource, an exclusive lease's period [acquired_at, expires_at) overlaps no other
--   lease's period, and shared leases overlap only shared ones: one exclusion constraint
--   (leases_exclusion) over the resource's key, the period and a "scope" (all ids for an
--   exclusive lease, the lease's own id for a shared one). A lease is live while expires_at >
--   ikigai_now(); a new lease's period starts at ikigai_now(), so an expired lease overlaps it
--   no more and frees the resource by itself, with no cleanup job; a renewed lease keeps its
--   start, so an expired lease that someone else took can never be renewed;
-- - btree_gist (text equality in a GiST index) is not shipped with the embedded server, so the
--   resource is compared through lease_key(): 128 bits of two independent 64-bit text hashes
--   as an inet, which GiST's built-in inet_ops compares with =. Two resources with equal keys
--   would only refuse each other (never grant twice); the odds are about 2^-128 per pair;
-- - a lease belongs to an identity (never deleted) and has a unique token; expires_at >
--   acquired_at; a resource is 1-512 characters, compared and sorted bytewise (COLLATE "C", so
--   prefix scans use the btree index).
-- depends: 0013-tasks

CREATE OR REPLACE FUNCTION lease_key(resource TEXT) RETURNS inet
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT CAST(regexp_replace(
               lpad(to_hex(hashtextextended(resource, 0)), 16, '0')
               || lpad(to_hex(hashtextextended(resource, 1)), 16, '0'),
               '(.{4})(?!$)', '\1:', 'g') AS inet)
$fn$;

CREATE TABLE IF NOT EXISTS leases (
    id          BIGSERIAL PRIMARY KEY,
    resource    TEXT COLLATE "C" NOT NULL
                CONSTRAINT leases_resource_check CHECK (length(resource) BETWEEN 1 AND 512),
    holder_id   BIGINT NOT NULL REFERENCES identities (id),
    exclusive   BOOLEAN NOT NULL,
    token       UUID NOT NULL DEFAULT gen_random_uuid() CONSTRAINT leases_token_key UNIQUE,
    acquired_at TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    expires_at  TIMESTAMPTZ NOT NULL,
    CONSTRAINT leases_period_check CHECK (expires_at > acquired_at),
    CONSTRAINT leases_exclusion EXCLUDE USING gist (
        lease_key(resource) inet_ops WITH =,
        tstzrange(acquired_at, expires_at) WITH &&,
        (CASE WHEN exclusive THEN int8range(NULL, NULL) ELSE int8range(id, id, '[]') END) WITH &&
    )
);
-- One resource's leases (acquire's explanations, force_release) and prefix scans (held).
CREATE INDEX IF NOT EXISTS leases_resource_idx ON leases (resource, id);
-- Expired leases, oldest first: what each acquire sweeps a few of.
CREATE INDEX IF NOT EXISTS leases_expires_idx ON leases (expires_at);

UPDATE schema_metadata SET schema_version = 14 WHERE schema_version < 14;
