-- Undo 0023: 0007's statement trigger notifies again; the version goes back to 22.
DROP TRIGGER IF EXISTS mail_recipients_notify_update ON mail_recipients;
CREATE TRIGGER mail_recipients_notify_update
    AFTER UPDATE ON mail_recipients REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION mail_notify_unread();
DROP FUNCTION IF EXISTS mail_notify_unread_row();
UPDATE schema_metadata SET schema_version = 22 WHERE schema_version = 23;
