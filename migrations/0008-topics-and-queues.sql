-- Topics, subscriptions, consumer offsets and queue work (seed 004's topics, subscriptions,
-- consumer_offsets, on PostgreSQL). Invariants the schema keeps:
-- - a topic mail carries its topic and its log_offset; offsets of a topic are unique, and they
--   are taken from topics.next_offset under the topic row's lock held to commit (queries/
--   topics.sql), so they are gapless and commit in order;
-- - a stored consumer offset never exceeds what the consumer committed (GREATEST);
-- - every mail of a queue topic has one queue_items row; a claimed row has a token and a lease,
--   no other row has either;
-- - queue rows that become available notify channel ikigai_queue (payload: topic ids), so
--   blocked claimers wake on commit.
-- Deleting a topic deletes its log (its mail, their copies in inboxes, offsets, queue rows).
-- A reply's parent may now disappear (retention): parent_id becomes NULL then.
-- Idempotent, and run on adopted C-era databases too (their schema_version, 9, is above ours).
-- ikigai-adopt: run
-- depends: 0007-identities-and-mail

CREATE TABLE IF NOT EXISTS topics (
    id           BIGSERIAL PRIMARY KEY,
    name         TEXT NOT NULL
                 CONSTRAINT topics_name_key UNIQUE
                 CONSTRAINT topics_name_check
                 CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    kind         TEXT NOT NULL DEFAULT 'broadcast'
                 CONSTRAINT topics_kind_check CHECK (kind IN ('broadcast', 'queue')),
    retention    INTERVAL NOT NULL DEFAULT interval '7 days'
                 CONSTRAINT topics_retention_check CHECK (retention > interval '0'),
    max_attempts INTEGER NOT NULL DEFAULT 5
                 CONSTRAINT topics_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000),
    next_offset  BIGINT NOT NULL DEFAULT 1,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT ikigai_now()
);

CREATE TABLE IF NOT EXISTS subscriptions (
    identity_id   BIGINT NOT NULL REFERENCES identities (id),
    topic_id      BIGINT NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    subscribed_at TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    PRIMARY KEY (identity_id, topic_id)
);
CREATE INDEX IF NOT EXISTS subscriptions_topic_idx ON subscriptions (topic_id, identity_id);

CREATE TABLE IF NOT EXISTS consumer_offsets (
    identity_id BIGINT NOT NULL REFERENCES identities (id),
    topic_id    BIGINT NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    last_offset BIGINT NOT NULL DEFAULT 0 CONSTRAINT consumer_offsets_check CHECK (last_offset >= 0),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    PRIMARY KEY (identity_id, topic_id)
);

ALTER TABLE mail ADD COLUMN IF NOT EXISTS topic_id BIGINT REFERENCES topics (id) ON DELETE CASCADE;
ALTER TABLE mail ADD COLUMN IF NOT EXISTS log_offset BIGINT;
CREATE UNIQUE INDEX IF NOT EXISTS mail_topic_offset_idx ON mail (topic_id, log_offset)
    WHERE topic_id IS NOT NULL;
ALTER TABLE mail DROP CONSTRAINT IF EXISTS mail_topic_offset_check;
ALTER TABLE mail ADD CONSTRAINT mail_topic_offset_check
    CHECK ((topic_id IS NULL) = (log_offset IS NULL));
ALTER TABLE mail DROP CONSTRAINT IF EXISTS mail_parent_id_fkey;
ALTER TABLE mail ADD CONSTRAINT mail_parent_id_fkey
    FOREIGN KEY (parent_id) REFERENCES mail (id) ON DELETE SET NULL;

CREATE TABLE IF NOT EXISTS queue_items (
    mail_id     BIGINT PRIMARY KEY REFERENCES mail (id) ON DELETE CASCADE,
    topic_id    BIGINT NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    state       TEXT NOT NULL DEFAULT 'available'
                CONSTRAINT queue_items_state_check
                CHECK (state IN ('available', 'claimed', 'done', 'dead')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    holder_id   BIGINT REFERENCES identities (id),
    token       UUID,
    lease_until TIMESTAMPTZ,
    last_error  TEXT,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    CONSTRAINT queue_items_lease_check
        CHECK ((state = 'claimed') = (token IS NOT NULL AND lease_until IS NOT NULL))
);
-- What claim scans: a topic's open work, oldest first.
CREATE INDEX IF NOT EXISTS queue_items_open_idx ON queue_items (topic_id, mail_id)
    WHERE state IN ('available', 'claimed');
CREATE INDEX IF NOT EXISTS queue_items_dead_idx ON queue_items (topic_id, mail_id)
    WHERE state = 'dead';

-- mail_view gains the topic (name) and the offset; columns are appended (CREATE OR REPLACE).
CREATE OR REPLACE VIEW mail_view AS
SELECT m.id, m.thread_id, m.parent_id, m.sender_id, s.name AS sender,
       ARRAY(SELECT i.name
             FROM mail_recipients AS r JOIN identities AS i ON i.id = r.identity_id
             WHERE r.mail_id = m.id
             ORDER BY i.name) AS recipients,
       m.subject, m.body, m.priority, m.deadline_at, m.attachments, m.metadata,
       m.idempotency_key, m.deleted_by_sender, m.created_at,
       m.topic_id, t.name AS topic, m.log_offset
FROM mail AS m
JOIN identities AS s ON s.id = m.sender_id
LEFT JOIN topics AS t ON t.id = m.topic_id;

CREATE OR REPLACE FUNCTION queue_notify_available() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    ids TEXT;
BEGIN
    SELECT string_agg(DISTINCT topic_id::text, ',') INTO ids
    FROM changed WHERE state = 'available';
    IF ids IS NOT NULL THEN
        PERFORM pg_notify('ikigai_queue', CASE WHEN length(ids) > 7000 THEN '*' ELSE ids END);
    END IF;
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS queue_items_notify_insert ON queue_items;
CREATE TRIGGER queue_items_notify_insert
    AFTER INSERT ON queue_items REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION queue_notify_available();
DROP TRIGGER IF EXISTS queue_items_notify_update ON queue_items;
CREATE TRIGGER queue_items_notify_update
    AFTER UPDATE ON queue_items REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION queue_notify_available();

UPDATE schema_metadata SET schema_version = 8 WHERE schema_version < 8;
