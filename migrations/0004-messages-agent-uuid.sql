-- Events belong to an agent: messages.agent_uuid, a foreign key on (agent_uuid, session_id) so an
-- event's agent is always an agent of the event's session, the (agent_uuid, id) index lineage
-- replay reads by, and a partial index on clears so "newest clear of an agent <= X" is one probe.
-- Idempotent: a C-era database that already has the column keeps it, its data and its own
-- foreign key; if its old rows break the session rule the new key checks new rows only.
-- ikigai-adopt: run
-- depends: 0003-agents

ALTER TABLE messages ADD COLUMN IF NOT EXISTS agent_uuid TEXT NULL;

DO $$
BEGIN
    -- messages.agent_uuid REFERENCES agents (uuid) (a C-era database may already have one).
    IF NOT EXISTS (
        SELECT 1 FROM pg_constraint
        WHERE conrelid = 'messages'::regclass AND contype = 'f'
          AND confrelid = 'agents'::regclass
          AND conkey = ARRAY[(SELECT attnum FROM pg_attribute
                              WHERE attrelid = 'messages'::regclass AND attname = 'agent_uuid')]
    ) THEN
        ALTER TABLE messages ADD CONSTRAINT messages_agent_uuid_fkey
            FOREIGN KEY (agent_uuid) REFERENCES agents (uuid);
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_constraint
        WHERE conrelid = 'messages'::regclass AND conname = 'messages_agent_session_fkey'
    ) THEN
        ALTER TABLE messages ADD CONSTRAINT messages_agent_session_fkey
            FOREIGN KEY (agent_uuid, session_id) REFERENCES agents (uuid, session_id) NOT VALID;
        BEGIN
            ALTER TABLE messages VALIDATE CONSTRAINT messages_agent_session_fkey;
        EXCEPTION WHEN foreign_key_violation THEN
            RAISE NOTICE 'messages_agent_session_fkey left NOT VALID: old rows break it';
        END;
    END IF;
END
$$;

CREATE INDEX IF NOT EXISTS idx_messages_agent ON messages (agent_uuid, id);

CREATE INDEX IF NOT EXISTS idx_messages_agent_clear ON messages (agent_uuid, id)
    WHERE kind = 'clear';

UPDATE schema_metadata SET schema_version = 4 WHERE schema_version < 4;
