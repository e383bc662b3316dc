-- Undo 0017: the notify triggers, watchers, lease_waits, session_listeners and
-- identities.parent_id go; new recipient rows notify ikigai_mail through 0007's function again.
DROP TRIGGER IF EXISTS mail_recipients_notify_insert ON mail_recipients;
CREATE TRIGGER mail_recipients_notify_insert
    AFTER INSERT ON mail_recipients REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION mail_notify_unread();
DROP FUNCTION IF EXISTS mail_notify_insert();
DROP TRIGGER IF EXISTS leases_notify_insert ON leases;
DROP TRIGGER IF EXISTS leases_notify_update ON leases;
DROP TRIGGER IF EXISTS leases_notify_delete ON leases;
DROP FUNCTION IF EXISTS lease_notify();
DROP TRIGGER IF EXISTS tasks_notify_insert ON tasks;
DROP TRIGGER IF EXISTS tasks_notify_update ON tasks;
DROP TRIGGER IF EXISTS tasks_notify_delete ON tasks;
DROP FUNCTION IF EXISTS task_notify();
DROP FUNCTION IF EXISTS ikigai_notify_ids(TEXT, TEXT);
DROP FUNCTION IF EXISTS prune_identities(TIMESTAMPTZ);
DROP TABLE IF EXISTS session_listeners;
DROP TABLE IF EXISTS lease_waits;
DROP TABLE IF EXISTS watchers;
DROP INDEX IF EXISTS identities_parent_idx;
ALTER TABLE identities DROP CONSTRAINT IF EXISTS identities_parent_check;
ALTER TABLE identities DROP COLUMN IF EXISTS parent_id;
UPDATE schema_metadata SET schema_version = 16 WHERE schema_version = 17;
