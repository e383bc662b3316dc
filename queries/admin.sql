-- name: schema_metadata_exists()^
-- True when the schema_metadata table exists (false on an empty database).
SELECT to_regclass('schema_metadata') IS NOT NULL AS exists;

-- name: schema_version()^
-- The schema version recorded by the migrations (NULL when none is recorded).
SELECT max(schema_version) AS version FROM schema_metadata;

-- name: migration_try_lock(key)^
-- Take the migration advisory lock if it is free, without waiting (locked: whether it was
-- taken). Session-level: PostgreSQL releases it when the connection closes, so a killed
-- migrator never leaves it behind. Migrators poll it rather than wait in pg_advisory_lock: a
-- waiting statement holds a snapshot, and CREATE INDEX CONCURRENTLY (0015) waits for every
-- older snapshot, so waiters and the migrator would wait for each other.
SELECT pg_try_advisory_lock(:key) AS locked;

-- name: advisory_lock_holders(key)
-- The sessions holding an int8 advisory lock (pg_locks splits the key: classid = high 32 bits,
-- objid = low 32 bits, objsubid = 1), with what pg_stat_activity knows about them.
SELECT l.pid, a.application_name, CAST(a.client_addr AS text) AS client_addr,
       a.backend_start, a.state
FROM pg_locks AS l
LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid = CAST((CAST(:key AS bigint) >> 32) & 4294967295 AS oid)
  AND l.objid = CAST(CAST(:key AS bigint) & 4294967295 AS oid)
ORDER BY l.pid;

-- name: applied_migration_hashes()
-- Hashes of the migrations yoyo recorded as applied (call only when _yoyo_migration exists).
SELECT migration_hash FROM _yoyo_migration;

-- name: migration_unlock(key)^
-- Release the migration advisory lock.
SELECT pg_advisory_unlock(:key) AS unlocked;

-- name: migrator_session()^
-- yoyo's connection, before it migrates: named (to be found in pg_stat_activity), and, on
-- PostgreSQL 14+, checking its client every second, so that a migrator killed mid-statement
-- does not leave that statement running beside the next migrator's (CASE evaluates
-- set_config only on a server that knows the setting).
SELECT set_config('application_name', 'ikigai-store migrate (yoyo)', false) AS name,
       CASE WHEN current_setting('server_version_num')::int >= 140000
            THEN set_config('client_connection_check_interval', '1s', false) END AS check_interval;

-- name: yoyo_bookkeeping_exists()^
-- True when yoyo has recorded migrations in this database.
SELECT to_regclass('_yoyo_migration') IS NOT NULL AS exists;

-- name: database_exists(name)^
-- True when a database of that name exists on the server.
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = :name) AS exists;

-- name: truncate_all()#
-- Empty every application table and restart the id sequences (tests only).
TRUNCATE TABLE queue_items, consumer_offsets, subscriptions, mail_recipients, mail, topics,
    session_identities, identities, messages, agents, sessions
    RESTART IDENTITY CASCADE;
