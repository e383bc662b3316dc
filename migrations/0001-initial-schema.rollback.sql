-- Undo 0001: drop the event store tables.
DROP TABLE IF EXISTS messages;
DROP TABLE IF EXISTS sessions;
DROP TABLE IF EXISTS schema_metadata;
