-- name: schema_metadata_exists()$
-- True when the schema_metadata table exists (false on an empty database).
SELECT to_regclass('schema_metadata') IS NOT NULL;

-- name: schema_version()$
-- The schema version recorded by the migrations (NULL when none is recorded).
SELECT max(schema_version) FROM schema_metadata;

-- name: migration_lock(key)$
-- Block until this session holds the migration advisory lock. Session-level: PostgreSQL
-- releases it when the connection closes, so a killed migrator never leaves it behind.
SELECT pg_advisory_lock(:key) IS NOT NULL;

-- name: migration_unlock(key)$
-- Release the migration advisory lock.
SELECT pg_advisory_unlock(:key);

-- name: yoyo_bookkeeping_exists()$
-- True when yoyo has recorded migrations in this database.
SELECT to_regclass('_yoyo_migration') IS NOT NULL;

-- name: database_exists(name)$
-- True when a database of that name exists on the server.
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = :name);

-- name: truncate_all()#
-- Empty every application table and restart the id sequences (tests only).
TRUNCATE TABLE messages, agents, sessions RESTART IDENTITY CASCADE;
