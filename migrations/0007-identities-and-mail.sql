-- Identities and agent mail (seed 004's agents, session_identities, messages and
-- message_recipients, on PostgreSQL). Invariants the schema itself keeps:
-- - identities are never deleted (retired_at instead), so every mail keeps its sender and
--   recipients; a name is unique and matches the documented pattern;
-- - one mail row per send, one recipient row per recipient; a recipient row's state is one of
--   six and snoozed_until is set exactly when the state is snoozed;
-- - an idempotency key is unique per sender (NULL keys are not compared);
-- - every recipient row that becomes unread notifies channel ikigai_mail (payload: the
--   recipients' identity ids, comma separated, or * when too many), so waiters wake on commit.
-- Times come from ikigai_now(): statement_timestamp(), unless the setting ikigai.now holds a
-- timestamp (tests move the clock with set_config('ikigai.now', ..., true)).
-- Topics (issue 9) will add mail.topic_id and mail.log_offset to the same mail table.
-- Idempotent, and run on adopted C-era databases too (their schema_version, 9, is above ours).
-- ikigai-adopt: run
-- depends: 0006-search-bounded-prefix

CREATE OR REPLACE FUNCTION ikigai_now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $fn$
    SELECT COALESCE(CAST(NULLIF(current_setting('ikigai.now', true), '') AS timestamptz),
                    statement_timestamp())
$fn$;

CREATE TABLE IF NOT EXISTS identities (
    id             BIGSERIAL PRIMARY KEY,
    name           TEXT NOT NULL
                   CONSTRAINT identities_name_key UNIQUE
                   CONSTRAINT identities_name_check
                   CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    project_key    TEXT,
    git_branch     TEXT,
    purpose        TEXT,
    working_dir    TEXT,
    hostname       TEXT,
    agent_uuid     TEXT CONSTRAINT identities_agent_uuid_key UNIQUE
                   REFERENCES agents (uuid) ON DELETE SET NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    last_active_at TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    retired_at     TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS identities_recent_idx ON identities (last_active_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS identities_project_idx
    ON identities (project_key, last_active_at DESC, id DESC);

CREATE TABLE IF NOT EXISTS session_identities (
    session_key    TEXT PRIMARY KEY,
    identity_id    BIGINT NOT NULL REFERENCES identities (id),
    project_key    TEXT,
    git_branch     TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    last_active_at TIMESTAMPTZ NOT NULL DEFAULT ikigai_now()
);
CREATE INDEX IF NOT EXISTS session_identities_identity_idx ON session_identities (identity_id);

CREATE TABLE IF NOT EXISTS mail (
    id                BIGSERIAL PRIMARY KEY,
    thread_id         TEXT NOT NULL,
    parent_id         BIGINT REFERENCES mail (id),
    sender_id         BIGINT NOT NULL REFERENCES identities (id),
    subject           TEXT NOT NULL,
    body              TEXT NOT NULL,
    priority          TEXT NOT NULL DEFAULT 'normal'
                      CONSTRAINT mail_priority_check CHECK (priority IN ('urgent', 'normal', 'low')),
    deadline_at       TIMESTAMPTZ,
    attachments       JSONB,
    metadata          JSONB,
    idempotency_key   TEXT,
    request_hash      TEXT,
    deleted_by_sender BOOLEAN NOT NULL DEFAULT false,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    -- Subject weighs more than body (A > B); bounded prefixes keep a tsvector under its 1 MB cap.
    search_vector     TSVECTOR GENERATED ALWAYS AS (
                          setweight(to_tsvector('english', left(subject, 10000)), 'A')
                          || setweight(to_tsvector('english', left(body, 100000)), 'B')
                      ) STORED,
    CONSTRAINT mail_idempotency_key UNIQUE (sender_id, idempotency_key)
);
CREATE INDEX IF NOT EXISTS mail_thread_idx ON mail (thread_id, id);
CREATE INDEX IF NOT EXISTS mail_sender_idx ON mail (sender_id, id);
CREATE INDEX IF NOT EXISTS mail_search_idx ON mail USING gin (search_vector);

CREATE TABLE IF NOT EXISTS mail_recipients (
    mail_id          BIGINT NOT NULL REFERENCES mail (id) ON DELETE CASCADE,
    identity_id      BIGINT NOT NULL REFERENCES identities (id),
    state            TEXT NOT NULL DEFAULT 'unread'
                     CONSTRAINT mail_recipients_state_check
                     CHECK (state IN ('unread', 'read', 'starred', 'snoozed', 'archived', 'trash')),
    snoozed_until    TIMESTAMPTZ,
    read_at          TIMESTAMPTZ,
    acked_at         TIMESTAMPTZ,
    state_changed_at TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    PRIMARY KEY (identity_id, mail_id),
    CONSTRAINT mail_recipients_snooze_check CHECK ((state = 'snoozed') = (snoozed_until IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS mail_recipients_mail_idx ON mail_recipients (mail_id);
-- What wait, counts and discover look for: a recipient's unread or snoozed rows, oldest first.
CREATE INDEX IF NOT EXISTS mail_recipients_pending_idx
    ON mail_recipients (identity_id, mail_id)
    WHERE state IN ('unread', 'snoozed');

-- A mail as callers see it: sender and recipients by name (recipients sorted).
CREATE OR REPLACE VIEW mail_view AS
SELECT m.id, m.thread_id, m.parent_id, m.sender_id, s.name AS sender,
       ARRAY(SELECT i.name
             FROM mail_recipients AS r JOIN identities AS i ON i.id = r.identity_id
             WHERE r.mail_id = m.id
             ORDER BY i.name) AS recipients,
       m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
       m.idempotency_key, m.deleted_by_sender, m.created_at
FROM mail AS m
JOIN identities AS s ON s.id = m.sender_id;

-- Recipient rows with their effective state: a snooze whose time has passed is unread (and
-- has no snoozed_until), with no background job having to wake it.
CREATE OR REPLACE VIEW mailbox AS
SELECT r.identity_id, r.mail_id,
       CASE WHEN r.state = 'snoozed' AND r.snoozed_until <= ikigai_now() THEN 'unread'
            ELSE r.state END AS state,
       CASE WHEN r.state = 'snoozed' AND r.snoozed_until <= ikigai_now() THEN NULL
            ELSE r.snoozed_until END AS snoozed_until,
       r.read_at, r.acked_at, r.state_changed_at
FROM mail_recipients AS r;

CREATE OR REPLACE FUNCTION mail_notify_unread() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    ids TEXT;
BEGIN
    SELECT string_agg(DISTINCT identity_id::text, ',') INTO ids
    FROM changed WHERE state = 'unread';
    IF ids IS NOT NULL THEN
        PERFORM pg_notify('ikigai_mail', CASE WHEN length(ids) > 7000 THEN '*' ELSE ids END);
    END IF;
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS mail_recipients_notify_insert ON mail_recipients;
CREATE TRIGGER mail_recipients_notify_insert
    AFTER INSERT ON mail_recipients REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION mail_notify_unread();
DROP TRIGGER IF EXISTS mail_recipients_notify_update ON mail_recipients;
CREATE TRIGGER mail_recipients_notify_update
    AFTER UPDATE ON mail_recipients REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION mail_notify_unread();

UPDATE schema_metadata SET schema_version = 7 WHERE schema_version < 7;
