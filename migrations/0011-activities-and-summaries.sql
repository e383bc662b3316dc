-- The activity feed and summaries (seed 004's activities and agent_summaries, plus the context
-- summaries the ikigai runtime keeps per agent). Invariants the schema itself keeps:
-- - an activity's type is one of those the code writes (Subtrate never widened its CHECK, so
--   its review activities failed silently: every type any area writes is listed here, and a
--   test checks the list against the code);
-- - activities and summaries belong to an identity, which is never deleted;
-- - a context summary covers one range of its agent's messages, start <= end, once per range;
--   cost and token counts are never negative.
-- The feed is read newest first by id (ids of one writer are in order; the feed is a log for
-- people, not a position consumers follow), filtered by identity or type through the indexes.
-- depends: 0010-queue-claim-cost

CREATE TABLE IF NOT EXISTS activities (
    id          BIGSERIAL PRIMARY KEY,
    identity_id BIGINT NOT NULL REFERENCES identities (id),
    type        TEXT NOT NULL
                CONSTRAINT activities_type_check CHECK (type IN (
                    'commit', 'message', 'session_start', 'session_complete', 'decision',
                    'error', 'blocker', 'heartbeat', 'task_complete', 'review_requested',
                    'review_started', 'review_approved', 'review_rejected', 'review_completed',
                    'plan_submitted', 'plan_decided')),
    description TEXT NOT NULL,
    metadata    JSONB,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT ikigai_now()
);
CREATE INDEX IF NOT EXISTS activities_identity_idx ON activities (identity_id, id);
CREATE INDEX IF NOT EXISTS activities_type_idx ON activities (type, id);
-- One identity's activities of one type, newest first (feed(identity=, type=)).
CREATE INDEX IF NOT EXISTS activities_identity_type_idx ON activities (identity_id, type, id);
CREATE INDEX IF NOT EXISTS activities_created_idx ON activities (created_at);

CREATE TABLE IF NOT EXISTS agent_summaries (
    id              BIGSERIAL PRIMARY KEY,
    identity_id     BIGINT NOT NULL REFERENCES identities (id),
    summary         TEXT NOT NULL,
    delta           TEXT,
    transcript_hash TEXT,
    cost_usd        DOUBLE PRECISION
                    CONSTRAINT agent_summaries_cost_check CHECK (cost_usd >= 0),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT ikigai_now()
);
CREATE INDEX IF NOT EXISTS agent_summaries_identity_idx ON agent_summaries (identity_id, id);

CREATE TABLE IF NOT EXISTS context_summaries (
    id           BIGSERIAL PRIMARY KEY,
    agent_uuid   TEXT NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    summary      TEXT NOT NULL,
    start_msg_id BIGINT NOT NULL,
    end_msg_id   BIGINT NOT NULL,
    token_count  INTEGER NOT NULL
                 CONSTRAINT context_summaries_tokens_check CHECK (token_count >= 0),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    CONSTRAINT context_summaries_range_check CHECK (start_msg_id <= end_msg_id),
    CONSTRAINT context_summaries_range_key UNIQUE (agent_uuid, start_msg_id, end_msg_id)
);
CREATE INDEX IF NOT EXISTS context_summaries_agent_idx ON context_summaries (agent_uuid, id);

UPDATE schema_metadata SET schema_version = 11 WHERE schema_version < 11;
