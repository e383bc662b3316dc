-- Push instead of polling (issue 24): what `ikigai-store watch`, the MCP resources and their
-- subscriptions need from the schema. Invariants the schema keeps:
-- - a child identity (a coding agent's subagent) names the identity that started it in
--   parent_id; an identity is never its own parent; prune_identities() deletes retired
--   identities nothing refers to (identities were never deleted before);
-- - watchers: one row per watched identity, the mail ids and task ids its watcher has already
--   printed and that are still pending (unread mail, available tasks), so a restarted watcher
--   prints each thing once; written by the watcher only;
-- - lease_waits: an identity waits for a resource to be free (a denied edit, `leases.wait_for`);
--   the watcher prints the resource once it is free and deletes the row;
-- - session_listeners: a server that shows a session's (or an agent's) replayed context to a
--   subscribed client registers the session here until expires_at; an append to a listened
--   session notifies channel ikigai_session (payload: the session id). Appends to other
--   sessions pay one index probe (queries/messages.sql), not a trigger;
-- - notifications, all delivered on commit, payloads comma-separated integers or * (too many):
--   ikigai_task: the task_lists row ids of tasks inserted, updated or deleted;
--   ikigai_lease: the holder identity ids of leases granted, renewed or removed;
--   ikigai_thread: hashtext(thread_id) of the threads that received a mail (a collision only
--   wakes a listener for nothing).
-- depends: 0016-post-mail

ALTER TABLE identities ADD COLUMN IF NOT EXISTS parent_id BIGINT
    CONSTRAINT identities_parent_fkey REFERENCES identities (id);
ALTER TABLE identities DROP CONSTRAINT IF EXISTS identities_parent_check;
ALTER TABLE identities ADD CONSTRAINT identities_parent_check CHECK (parent_id <> id);
CREATE INDEX IF NOT EXISTS identities_parent_idx ON identities (parent_id)
    WHERE parent_id IS NOT NULL;

-- Delete retired identities (retired before retired_before) that no row refers to: each is
-- tried in a subtransaction and kept when a foreign key refuses (it sent or received mail,
-- holds history...). Children go before their parents (id descending). Their session mappings,
-- watcher state and lease waits go with them. Returns the names deleted.
CREATE OR REPLACE FUNCTION prune_identities(retired_before TIMESTAMPTZ) RETURNS SETOF TEXT
LANGUAGE plpgsql
AS $fn$
DECLARE
    victim RECORD;
BEGIN
    FOR victim IN
        SELECT id, name FROM identities
        WHERE retired_at < retired_before
        ORDER BY id DESC
        FOR UPDATE SKIP LOCKED
    LOOP
        BEGIN
            DELETE FROM session_identities WHERE identity_id = victim.id;
            DELETE FROM identities WHERE id = victim.id;
            RETURN NEXT victim.name;
        EXCEPTION WHEN foreign_key_violation THEN
            NULL;  -- still referred to: kept (retired)
        END;
    END LOOP;
END
$fn$;

CREATE TABLE IF NOT EXISTS watchers (
    identity_id BIGINT PRIMARY KEY REFERENCES identities (id) ON DELETE CASCADE,
    mail        BIGINT[] NOT NULL DEFAULT '{}',
    tasks       BIGINT[] NOT NULL DEFAULT '{}',
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT ikigai_now()
);

CREATE TABLE IF NOT EXISTS lease_waits (
    identity_id BIGINT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    resource    TEXT COLLATE "C" NOT NULL
                CONSTRAINT lease_waits_resource_check CHECK (length(resource) BETWEEN 1 AND 512),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    PRIMARY KEY (identity_id, resource)
);

CREATE TABLE IF NOT EXISTS session_listeners (
    session_id BIGINT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    listener   UUID NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, listener)
);

CREATE OR REPLACE FUNCTION ikigai_notify_ids(channel TEXT, ids TEXT) RETURNS void
LANGUAGE sql
AS $fn$
    SELECT pg_notify(channel, CASE WHEN length(ids) > 7000 THEN '*' ELSE ids END)
    WHERE ids IS NOT NULL
$fn$;

CREATE OR REPLACE FUNCTION task_notify() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM ikigai_notify_ids('ikigai_task',
                              (SELECT string_agg(DISTINCT list_id::text, ',') FROM changed));
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS tasks_notify_insert ON tasks;
CREATE TRIGGER tasks_notify_insert
    AFTER INSERT ON tasks REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION task_notify();
DROP TRIGGER IF EXISTS tasks_notify_update ON tasks;
CREATE TRIGGER tasks_notify_update
    AFTER UPDATE ON tasks REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION task_notify();
DROP TRIGGER IF EXISTS tasks_notify_delete ON tasks;
CREATE TRIGGER tasks_notify_delete
    AFTER DELETE ON tasks REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION task_notify();

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

-- New recipient rows: the recipients (ikigai_mail, as 0007's function does) and their threads.
CREATE OR REPLACE FUNCTION mail_notify_insert() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM ikigai_notify_ids('ikigai_mail',
                              (SELECT string_agg(DISTINCT identity_id::text, ',')
                               FROM changed WHERE state = 'unread'));
    PERFORM ikigai_notify_ids('ikigai_thread',
                              (SELECT string_agg(DISTINCT hashtext(m.thread_id)::text, ',')
                               FROM mail AS m
                               WHERE m.id IN (SELECT mail_id FROM changed)));
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS mail_recipients_notify_insert ON mail_recipients;
CREATE TRIGGER mail_recipients_notify_insert
    AFTER INSERT ON mail_recipients REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION mail_notify_insert();

UPDATE schema_metadata SET schema_version = 17 WHERE schema_version < 17;
