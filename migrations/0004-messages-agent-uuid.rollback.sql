-- Undo 0004: drop the agent indexes and messages.agent_uuid.
DROP INDEX IF EXISTS idx_messages_agent_clear;
DROP INDEX IF EXISTS idx_messages_agent;
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_agent_session_fkey;
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_agent_uuid_fkey;
ALTER TABLE messages DROP COLUMN IF EXISTS agent_uuid;
UPDATE schema_metadata SET schema_version = 3 WHERE schema_version = 4;
