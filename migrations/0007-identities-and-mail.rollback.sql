-- Undo 0007: drops identities and every mail (there is no older home for them).
DROP VIEW IF EXISTS mailbox;
DROP VIEW IF EXISTS mail_view;
DROP TABLE IF EXISTS mail_recipients;
DROP TABLE IF EXISTS mail;
DROP TABLE IF EXISTS session_identities;
DROP TABLE IF EXISTS identities;
DROP FUNCTION IF EXISTS mail_notify_unread();
DROP FUNCTION IF EXISTS ikigai_now();
UPDATE schema_metadata SET schema_version = 6 WHERE schema_version = 7;
