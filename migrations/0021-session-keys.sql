-- Session keys (issue 21, OpenAI Agents SDK sessions): a framework names its conversations by a
-- string of its own (the SDK's session_id); session_keys maps (namespace, key) to one of our
-- sessions, so the same key always finds the same session, whoever asks first. Invariants: a
-- (namespace, key) names at most one session (primary key: two racing first uses cannot make
-- two); a session may have several keys; deleting a session deletes its keys.
-- depends: 0020-pop-events

CREATE TABLE IF NOT EXISTS session_keys (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    session_id BIGINT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    PRIMARY KEY (namespace, key)
);

CREATE INDEX IF NOT EXISTS idx_session_keys_session ON session_keys (session_id);

UPDATE schema_metadata SET schema_version = 21 WHERE schema_version < 21;
