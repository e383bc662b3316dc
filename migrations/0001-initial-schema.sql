-- Initial schema (seed 001): sessions and the append-only messages event stream.
-- Idempotent: adopts databases the ikigai C program created, leaving their data untouched.
-- depends:

CREATE TABLE IF NOT EXISTS schema_metadata (
    schema_version INTEGER PRIMARY KEY
);

CREATE TABLE IF NOT EXISTS sessions (
    id BIGSERIAL PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    ended_at TIMESTAMPTZ NULL,
    title TEXT NULL
);

CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions (started_at DESC);

CREATE TABLE IF NOT EXISTS messages (
    id BIGSERIAL PRIMARY KEY,
    session_id BIGINT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    content TEXT NULL,
    data JSONB NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

-- Per-session reads are ordered by id (NOW() is frozen inside a transaction), so index that.
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages (session_id, id);

-- Queries must use this exact expression for the index to apply.
CREATE INDEX IF NOT EXISTS idx_messages_search ON messages USING gin (to_tsvector('english', content));

INSERT INTO schema_metadata (schema_version)
SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM schema_metadata);

UPDATE schema_metadata SET schema_version = 1 WHERE schema_version < 1;
