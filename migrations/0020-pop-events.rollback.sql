-- Undo 0020: the version goes back to 19, 0018's partial index (mark, rewind, clear) is built
-- again CONCURRENTLY and 0020's dropped, and the kind CHECK loses 'pop' (left NOT VALID when
-- pop events are stored: rolling a migration back never deletes events). Runs outside a
-- transaction like 0020: statement i from the end undoes statement i of 0020. Idempotent.
DO $$
BEGIN
    UPDATE schema_metadata SET schema_version = 19 WHERE schema_version = 20;
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('idx_messages_session_controls')
                 AND NOT indisvalid) THEN
        DROP INDEX idx_messages_session_controls;
    END IF;
END
$$;

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_session_controls ON messages (session_id, id)
    WHERE kind IN ('mark', 'rewind', 'clear');

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_session_replay_controls;

DO $$
BEGIN
    ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_kind_check;
    ALTER TABLE messages ADD CONSTRAINT messages_kind_check CHECK (kind IN (
        'clear', 'system', 'user', 'assistant', 'tool_call', 'tool_result', 'mark', 'rewind',
        'fork', 'command', 'usage', 'interrupted', 'agent_killed')) NOT VALID;
END
$$;

DO $$
BEGIN
    ALTER TABLE messages VALIDATE CONSTRAINT messages_kind_check;
EXCEPTION WHEN check_violation THEN
    RAISE NOTICE 'messages_kind_check left NOT VALID: pop events are stored';
END
$$;
