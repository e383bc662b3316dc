-- Events belong to an agent: messages.agent_uuid, the (agent_uuid, id) index lineage replay reads
-- by, and a partial index on clears so "newest clear of an agent <= X" is one index probe.
-- Idempotent: a C-era database that already has the column keeps it and its data.
-- ikigai-adopt: run
-- depends: 0003-agents

ALTER TABLE messages ADD COLUMN IF NOT EXISTS agent_uuid TEXT NULL;

DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_constraint
        WHERE conrelid = 'messages'::regclass AND contype = 'f'
          AND confrelid = 'agents'::regclass
    ) THEN
        ALTER TABLE messages ADD CONSTRAINT messages_agent_uuid_fkey
            FOREIGN KEY (agent_uuid) REFERENCES agents (uuid);
    END IF;
END
$$;

CREATE INDEX IF NOT EXISTS idx_messages_agent ON messages (agent_uuid, id);

CREATE INDEX IF NOT EXISTS idx_messages_agent_clear ON messages (agent_uuid, id)
    WHERE kind = 'clear';

UPDATE schema_metadata SET schema_version = 4 WHERE schema_version < 4;
