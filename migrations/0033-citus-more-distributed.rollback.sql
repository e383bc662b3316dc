-- Undo 0033: on Citus, LangGraph's checkpoint rows, the activity feed and agent summaries go
-- back to the coordinator (their rows with them); on both, their primary keys (id) and foreign
-- keys return, and so do 0027's saver statements, 0026's post_mail() and 0030's
-- ikigai_distribute() (the placement functions per area go).
-- On Citus, this transaction both moves tables and replaces functions (which Citus propagates
-- to the workers over one connection per node): its shard commands run one at a time.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
END
$$;

DO $$
DECLARE
    t TEXT;
    distributed BOOLEAN;
BEGIN
    FOREACH t IN ARRAY ARRAY['langgraph_checkpoints', 'langgraph_blobs', 'langgraph_writes'] LOOP
        -- (pg_dist_partition exists only with citus: read it through EXECUTE.)
        IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
            EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1)'
                INTO distributed USING t::regclass;
            IF distributed THEN
                EXECUTE format('SELECT undistribute_table(%L)', t);
            END IF;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = t::regclass AND conname = t || '_pkey'
                     AND cardinality(conkey) = 2) THEN
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (id)', t, t || '_pkey');
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_constraint
                       WHERE conrelid = t::regclass AND conname = t || '_session_id_fkey') THEN
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (session_id) '
                           'REFERENCES langgraph_threads (session_id) ON DELETE CASCADE',
                           t, t || '_session_id_fkey');
        END IF;
    END LOOP;
END
$$;

-- The activity feed and agent summaries: back to the coordinator, with their primary keys
-- (id) and foreign keys to identities.
DO $$
DECLARE
    t TEXT;
    distributed BOOLEAN;
BEGIN
    FOREACH t IN ARRAY ARRAY['agent_summaries', 'activities'] LOOP
        IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
            EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1)'
                INTO distributed USING t::regclass;
            IF distributed THEN
                EXECUTE format('SELECT undistribute_table(%L)', t);
            END IF;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = t::regclass AND conname = t || '_pkey'
                     AND cardinality(conkey) = 2) THEN
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (id)', t, t || '_pkey');
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_constraint
                       WHERE conrelid = t::regclass AND conname = t || '_identity_id_fkey') THEN
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I FOREIGN KEY (identity_id) '
                           'REFERENCES identities (id)', t, t || '_identity_id_fkey');
        END IF;
    END LOOP;
END
$$;

DROP FUNCTION IF EXISTS ikigai_summary_history(TEXT, BIGINT);
DROP FUNCTION IF EXISTS ikigai_add_summary(TEXT, TEXT, TEXT, TEXT, DOUBLE PRECISION);
DROP FUNCTION IF EXISTS ikigai_identity_feed(TEXT, TEXT, TIMESTAMPTZ, BIGINT, BIGINT);
DROP FUNCTION IF EXISTS ikigai_record_activity(TEXT, TEXT, TEXT, JSONB);
DROP FUNCTION IF EXISTS ikigai_insert_activity(BIGINT, TEXT, TEXT, JSONB);
-- 0026's post_mail(), as it was.
CREATE OR REPLACE FUNCTION post_mail(
    thread_id         TEXT,
    sender_id         BIGINT,
    recipient_ids     BIGINT[],
    recipients        TEXT[],
    subject           TEXT,
    body              TEXT,
    priority          TEXT,
    metadata          JSONB,
    activity_type     TEXT DEFAULT NULL,
    description       TEXT DEFAULT NULL,
    activity_metadata JSONB DEFAULT NULL,
    parent_id         BIGINT DEFAULT NULL,
    deadline_at       TIMESTAMPTZ DEFAULT NULL,
    attachments       JSONB DEFAULT NULL,
    idempotency_key   TEXT DEFAULT NULL,
    request_hash      TEXT DEFAULT NULL,
    topic_id          BIGINT DEFAULT NULL,
    log_offset        BIGINT DEFAULT NULL,
    handed_ids        BIGINT[] DEFAULT NULL
) RETURNS mail
LANGUAGE sql VOLATILE
AS $fn$
    -- Parameters are qualified (post_mail.x): in SQL functions a column of the same name wins.
    WITH m AS (
        INSERT INTO mail (thread_id, parent_id, sender_id, recipients, subject, body, priority,
                          deadline_at, attachments, metadata, idempotency_key, request_hash,
                          topic_id, log_offset)
        SELECT post_mail.thread_id, post_mail.parent_id, post_mail.sender_id,
               post_mail.recipients, post_mail.subject, post_mail.body, post_mail.priority,
               post_mail.deadline_at, post_mail.attachments, post_mail.metadata,
               post_mail.idempotency_key, post_mail.request_hash, post_mail.topic_id,
               post_mail.log_offset
        WHERE cardinality(post_mail.recipient_ids) > 0 OR post_mail.topic_id IS NOT NULL
        ON CONFLICT (sender_id, idempotency_key) DO NOTHING
        RETURNING *
    ), delivered AS (
        INSERT INTO mail_recipients (mail_id, identity_id, state, read_at)
        SELECT m.id, r.id,
               CASE WHEN r.id = ANY(post_mail.handed_ids) THEN 'read' ELSE 'unread' END,
               CASE WHEN r.id = ANY(post_mail.handed_ids) THEN ikigai_now() END
        FROM m, unnest(post_mail.recipient_ids) AS r(id)
    ), act AS (
        INSERT INTO activities (identity_id, type, description, metadata)
        SELECT post_mail.sender_id, post_mail.activity_type, post_mail.description,
               COALESCE(post_mail.activity_metadata, '{}')
               || jsonb_build_object('mail_id', (SELECT m.id FROM m))
        WHERE post_mail.activity_type IS NOT NULL
    )
    SELECT m.* FROM m
$fn$;

DROP FUNCTION IF EXISTS langgraph_rebuild_latest(BIGINT, TEXT, TEXT);
DROP FUNCTION IF EXISTS langgraph_delete_for_runs(TEXT[]);
DROP FUNCTION IF EXISTS langgraph_drop_unnamed(BIGINT);
DROP FUNCTION IF EXISTS langgraph_delete_thread(TEXT);
DROP FUNCTION IF EXISTS langgraph_delete_rows(BIGINT);
DROP FUNCTION IF EXISTS langgraph_list_checkpoints(TEXT, TEXT, JSONB, TEXT, BIGINT);
DROP FUNCTION IF EXISTS langgraph_get_checkpoint(TEXT, TEXT, TEXT, TEXT[], TEXT[]);
DROP FUNCTION IF EXISTS langgraph_pending_writes(BIGINT, TEXT, TEXT);

-- 0027's statements, as they were.
CREATE OR REPLACE FUNCTION langgraph_blob_chain(
    leaf BIGINT, ns TEXT, channels TEXT[], versions TEXT[], known_channels TEXT[],
    known_versions TEXT[])
RETURNS TABLE (channel TEXT, version TEXT, type TEXT, blob BYTEA, base_version TEXT)
LANGUAGE sql STABLE
AS $fn$
    WITH RECURSIVE
    lineage AS MATERIALIZED (SELECT * FROM langgraph_lineage(leaf)),
    known AS MATERIALIZED (
        SELECT k.channel, k.version
        FROM unnest(known_channels, known_versions) AS k (channel, version)
    ),
    chain (channel, version, type, blob, base_version) AS (
        SELECT b.channel, b.version, b.type, b.blob, b.base_version
        FROM unnest(channels, versions) AS want (channel, version)
        JOIN lineage AS l ON true
        JOIN langgraph_blobs AS b
          ON b.session_id = l.session_id AND b.checkpoint_ns = ns
         AND b.channel = want.channel AND b.version = want.version AND b.id <= l.bound
        WHERE NOT EXISTS (SELECT 1 FROM known AS k
                          WHERE k.channel = want.channel AND k.version = want.version)
        UNION
        SELECT b.channel, b.version, b.type, b.blob, b.base_version
        FROM chain AS c
        JOIN lineage AS l ON true
        JOIN langgraph_blobs AS b
          ON b.session_id = l.session_id AND b.checkpoint_ns = ns
         AND b.channel = c.channel AND b.version = c.base_version AND b.id <= l.bound
        WHERE c.base_version IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM known AS k
                          WHERE k.channel = c.channel AND k.version = c.base_version)
    )
    SELECT channel, version, type, blob, base_version FROM chain
$fn$;

CREATE OR REPLACE FUNCTION langgraph_put(
    p_thread_id TEXT, p_title TEXT, p_checkpoint_ns TEXT, p_checkpoint_id TEXT,
    p_parent_checkpoint_id TEXT, p_checkpoint JSONB, p_metadata JSONB, p_channels TEXT[],
    p_versions TEXT[], p_types TEXT[], p_blobs BYTEA[], p_bases TEXT[])
RETURNS TABLE (session_id BIGINT, missing TEXT[], stored BIGINT)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
        WITH found AS (
            SELECT session_id, source_session_id FROM langgraph_threads WHERE thread_id = p_thread_id
            FOR KEY SHARE
        ),
        created AS (
            INSERT INTO sessions (title)
            SELECT p_title WHERE NOT EXISTS (SELECT 1 FROM found)
            RETURNING id
        ),
        named AS (
            INSERT INTO langgraph_threads (session_id, thread_id)
            SELECT id, p_thread_id FROM created
            RETURNING session_id
        ),
        thread AS (
            SELECT session_id FROM found UNION ALL SELECT session_id FROM named
        ),
        wanted AS MATERIALIZED (
            SELECT w.channel, w.version, w.type, w.blob, w.base
            FROM unnest(p_channels, p_versions, p_types,
                        p_blobs, p_bases) AS w (channel, version, type,
                                                                               blob, base)
        ),
        missing AS MATERIALIZED (
            SELECT w.channel
            FROM wanted AS w
            WHERE w.base IS NOT NULL
              AND NOT EXISTS (
                  SELECT 1
                  FROM found AS f
                  JOIN langgraph_blobs AS o
                    ON o.session_id = f.session_id AND o.checkpoint_ns = p_checkpoint_ns
                   AND o.channel = w.channel AND o.version = w.base)
              AND NOT EXISTS (
                  SELECT 1
                  FROM found AS f
                  CROSS JOIN LATERAL langgraph_lineage(f.session_id) AS l
                  JOIN langgraph_blobs AS o
                    ON o.session_id = l.session_id AND o.checkpoint_ns = p_checkpoint_ns
                   AND o.channel = w.channel AND o.version = w.base AND o.id <= l.bound
                  WHERE f.source_session_id IS NOT NULL AND l.depth > 0)
        ),
        checkpoint AS (
            INSERT INTO langgraph_checkpoints (session_id, checkpoint_ns, checkpoint_id,
                                               parent_checkpoint_id, checkpoint, metadata)
            SELECT session_id, p_checkpoint_ns, p_checkpoint_id, p_parent_checkpoint_id,
                   p_checkpoint, p_metadata
            FROM thread
            ON CONFLICT (session_id, checkpoint_ns, checkpoint_id) DO UPDATE
            SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
                checkpoint = EXCLUDED.checkpoint,
                metadata = EXCLUDED.metadata
            RETURNING session_id
        ),
        stored AS (
            INSERT INTO langgraph_blobs (session_id, checkpoint_ns, channel, version, type, blob,
                                         base_version)
            SELECT t.session_id, p_checkpoint_ns, w.channel, w.version, w.type, w.blob, w.base
            FROM thread AS t
            CROSS JOIN wanted AS w
            WHERE w.channel NOT IN (SELECT channel FROM missing)
            ON CONFLICT (session_id, checkpoint_ns, channel, version) DO NOTHING
            RETURNING 1
        )
        SELECT c.session_id,
               (SELECT COALESCE(array_agg(channel), '{}') FROM missing) AS missing,
               (SELECT count(*) FROM stored) AS stored
        FROM checkpoint AS c;
END
$fn$;

-- The placement functions go (this migration's and 0030's area, which 0030's body below
-- places again).
DROP FUNCTION IF EXISTS ikigai_distribute_0033_langgraph_activities();
DROP FUNCTION IF EXISTS ikigai_distribute_0030_events();

-- 0030's placement, as it was.
CREATE OR REPLACE FUNCTION ikigai_distribute()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    fk RECORD;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'ikigai_distribute: the citus extension is not created in this database'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    -- One distributor at a time (a second waits, then finds the table placed).
    PERFORM pg_advisory_xact_lock(hashtext('ikigai_distribute'));
    IF EXISTS (SELECT 1 FROM pg_dist_partition
               WHERE logicalrelid = 'messages'::regclass AND partmethod = 'h') THEN
        RETURN;
    END IF;
    FOR fk IN SELECT conname FROM pg_constraint
              WHERE conrelid = 'messages'::regclass AND contype = 'f' LOOP
        EXECUTE format('ALTER TABLE messages DROP CONSTRAINT %I', fk.conname);
    END LOOP;
    DROP TRIGGER IF EXISTS messages_search_vector ON messages;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                   WHERE attrelid = 'messages'::regclass AND attname = 'search_vector'
                     AND attgenerated = 's') THEN
        DROP INDEX IF EXISTS idx_messages_search_vector;
        ALTER TABLE messages DROP COLUMN IF EXISTS search_vector;
        ALTER TABLE messages ADD COLUMN search_vector tsvector
            GENERATED ALWAYS AS (to_tsvector('english', left(content, 100000))) STORED;
        CREATE INDEX idx_messages_search_vector ON messages USING gin (search_vector);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_constraint
               WHERE conrelid = 'messages'::regclass AND conname = 'messages_pkey'
                 AND cardinality(conkey) = 1) THEN
        ALTER TABLE messages DROP CONSTRAINT messages_pkey;
        ALTER TABLE messages ADD CONSTRAINT messages_pkey PRIMARY KEY (session_id, id);
    END IF;
    PERFORM create_distributed_table('messages', 'session_id');
    relation := 'messages';
    made := 'distributed by session_id';
    RETURN NEXT;
END
$fn$;

UPDATE schema_metadata SET schema_version = 32 WHERE schema_version = 33;
