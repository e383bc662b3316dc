-- Agent registry: one row per agent; a fork is one row pointing at its parent and fork point.
-- Idempotent, and converts the ikigai C program's agents table when it finds one
-- (created_at/ended_at BIGINT unix seconds, status enum agent_status, no session_id, nullable
-- fork_message_id, no creation order): see README "Adopting databases of the ikigai C program".
-- ikigai-adopt: run
-- depends: 0002-session-replay-indexes

CREATE TABLE IF NOT EXISTS agents (
    id BIGSERIAL NOT NULL UNIQUE,
    uuid TEXT PRIMARY KEY,
    session_id BIGINT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name TEXT NULL,
    parent_uuid TEXT NULL REFERENCES agents (uuid) ON DELETE RESTRICT,
    fork_message_id BIGINT NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'running',
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    ended_at TIMESTAMPTZ NULL,
    provider TEXT NULL,
    model TEXT NULL,
    thinking_level TEXT NULL,
    idle BOOLEAN NOT NULL DEFAULT false
);

DO $$
DECLARE
    fallback_session BIGINT;
BEGIN
    -- C era: unix-seconds timestamps.
    IF (SELECT data_type FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'agents'
          AND column_name = 'created_at') = 'bigint' THEN
        ALTER TABLE agents ALTER COLUMN created_at DROP DEFAULT;
        ALTER TABLE agents ALTER COLUMN created_at TYPE TIMESTAMPTZ USING to_timestamp(created_at);
        ALTER TABLE agents ALTER COLUMN created_at SET DEFAULT NOW();
    END IF;
    IF (SELECT data_type FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'agents'
          AND column_name = 'ended_at') = 'bigint' THEN
        ALTER TABLE agents ALTER COLUMN ended_at TYPE TIMESTAMPTZ USING to_timestamp(ended_at);
    END IF;
    -- C era: status was the enum agent_status ('running', 'dead').
    IF (SELECT data_type FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'agents'
          AND column_name = 'status') = 'USER-DEFINED' THEN
        ALTER TABLE agents ALTER COLUMN status DROP DEFAULT;
        ALTER TABLE agents ALTER COLUMN status TYPE TEXT USING status::text;
        ALTER TABLE agents ALTER COLUMN status SET DEFAULT 'running';
        DROP TYPE IF EXISTS agent_status;
    END IF;
    -- C era: no session_id. An agent belongs to the session its events are in, else to its
    -- parent's, else to the newest session (one titled 'adopted agents' is created if none).
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_schema = current_schema() AND table_name = 'agents'
                     AND column_name = 'session_id') THEN
        ALTER TABLE agents ADD COLUMN session_id BIGINT NULL REFERENCES sessions (id) ON DELETE CASCADE;
        IF EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_schema = current_schema() AND table_name = 'messages'
                     AND column_name = 'agent_uuid') THEN
            EXECUTE 'UPDATE agents a SET session_id = (SELECT min(m.session_id) FROM messages m
                     WHERE m.agent_uuid = a.uuid)';
        END IF;
        LOOP
            UPDATE agents c SET session_id = p.session_id
            FROM agents p
            WHERE c.parent_uuid = p.uuid AND c.session_id IS NULL AND p.session_id IS NOT NULL;
            EXIT WHEN NOT FOUND;
        END LOOP;
        IF EXISTS (SELECT 1 FROM agents WHERE session_id IS NULL) THEN
            SELECT max(id) INTO fallback_session FROM sessions;
            IF fallback_session IS NULL THEN
                INSERT INTO sessions (title) VALUES ('adopted agents') RETURNING id INTO fallback_session;
            END IF;
            UPDATE agents SET session_id = fallback_session WHERE session_id IS NULL;
        END IF;
        ALTER TABLE agents ALTER COLUMN session_id SET NOT NULL;
    END IF;
    -- C era: fork_message_id could be NULL; 0 now means "none of the parent's own events".
    UPDATE agents SET fork_message_id = 0 WHERE fork_message_id IS NULL;
    ALTER TABLE agents ALTER COLUMN fork_message_id SET DEFAULT 0;
    ALTER TABLE agents ALTER COLUMN fork_message_id SET NOT NULL;
    -- C era: no creation order. Number parents before children, oldest first.
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_schema = current_schema() AND table_name = 'agents'
                     AND column_name = 'id') THEN
        ALTER TABLE agents ADD COLUMN id BIGSERIAL NOT NULL UNIQUE;
        -- Terminates: parent_uuid references an existing row, so the depth walk is finite.
        WITH RECURSIVE tree (uuid, depth) AS (
            SELECT uuid, 0 FROM agents WHERE parent_uuid IS NULL
            UNION ALL
            SELECT a.uuid, t.depth + 1 FROM agents a JOIN tree t ON a.parent_uuid = t.uuid
        ), numbered AS (
            SELECT a.uuid, row_number() OVER (ORDER BY t.depth, a.created_at, a.uuid) AS n
            FROM agents a JOIN tree t USING (uuid)
        )
        UPDATE agents a SET id = -numbered.n FROM numbered WHERE a.uuid = numbered.uuid;
        UPDATE agents SET id = -id;
        PERFORM setval(pg_get_serial_sequence('agents', 'id'), COALESCE(max(id), 0) + 1, false)
        FROM agents;
    END IF;
END
$$;

ALTER TABLE agents ADD COLUMN IF NOT EXISTS name TEXT NULL;
ALTER TABLE agents ADD COLUMN IF NOT EXISTS ended_at TIMESTAMPTZ NULL;
ALTER TABLE agents ADD COLUMN IF NOT EXISTS provider TEXT NULL;
ALTER TABLE agents ADD COLUMN IF NOT EXISTS model TEXT NULL;
ALTER TABLE agents ADD COLUMN IF NOT EXISTS thinking_level TEXT NULL;
ALTER TABLE agents ADD COLUMN IF NOT EXISTS idle BOOLEAN NOT NULL DEFAULT false;

-- (uuid, session_id) is unique because uuid is: it lets messages reference both, so the database
-- itself guarantees that an event's agent belongs to the event's session.
ALTER TABLE agents DROP CONSTRAINT IF EXISTS agents_uuid_session_key;
ALTER TABLE agents ADD CONSTRAINT agents_uuid_session_key UNIQUE (uuid, session_id);

ALTER TABLE agents DROP CONSTRAINT IF EXISTS agents_status_check;
ALTER TABLE agents ADD CONSTRAINT agents_status_check
    CHECK (status IN ('running', 'dead', 'reaped'));

CREATE INDEX IF NOT EXISTS idx_agents_parent ON agents (parent_uuid, id);
CREATE INDEX IF NOT EXISTS idx_agents_status ON agents (status, id);
CREATE INDEX IF NOT EXISTS idx_agents_session ON agents (session_id, id);

UPDATE schema_metadata SET schema_version = 3 WHERE schema_version < 3;
