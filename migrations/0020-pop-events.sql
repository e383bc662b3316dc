-- Pop events (issue 21, OpenAI Agents SDK sessions): the kind 'pop' joins the event vocabulary
-- (messages_kind_check, equal to ikigai_store.VALID_KINDS), and the timeline's partial index
-- covers every event that decides what replay keeps: mark, rewind, clear and pop (a pop removes
-- the event its data.target_message_id names from the context; ikigai_store/replay.py). Runs
-- outside a transaction, like 0018, so a big table stays writable: the CHECK is swapped in one
-- statement and added NOT VALID (no scan under the table's lock), then validated under a lock
-- that lets writes go on; the new index, idx_messages_session_replay_controls, is built
-- CONCURRENTLY before 0018's is dropped (an invalid one left by an interrupted build is dropped
-- first: applying the migration again resumes). Statement i from the end of the rollback undoes
-- statement i here.
-- transactional: false
-- depends: 0019-session-imports

DO $$
BEGIN
    ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_kind_check;
    ALTER TABLE messages ADD CONSTRAINT messages_kind_check CHECK (kind IN (
        'clear', 'system', 'user', 'assistant', 'tool_call', 'tool_result', 'mark', 'rewind',
        'fork', 'command', 'usage', 'interrupted', 'agent_killed', 'pop')) NOT VALID;
END
$$;

DO $$
BEGIN
    BEGIN
        ALTER TABLE messages VALIDATE CONSTRAINT messages_kind_check;
    EXCEPTION WHEN check_violation THEN
        RAISE NOTICE 'messages_kind_check left NOT VALID: old rows have other kinds';
    END;
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('idx_messages_session_replay_controls')
                 AND NOT indisvalid) THEN
        DROP INDEX idx_messages_session_replay_controls;
    END IF;
END
$$;

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_session_replay_controls
    ON messages (session_id, id)
    WHERE kind IN ('mark', 'rewind', 'clear', 'pop');

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_session_controls;

UPDATE schema_metadata SET schema_version = 20 WHERE schema_version < 20;
