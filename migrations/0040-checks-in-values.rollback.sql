-- Undo 0040: appends call ikigai_append() again (0032's), activities ikigai_record_activity()
-- and summaries ikigai_add_summary() (0033's); each returns no row when refused.

-- 0032's append (0030's, its wake-up through ikigai_notify).
CREATE OR REPLACE FUNCTION ikigai_append(sid BIGINT, agent TEXT, ev_kind TEXT, ev_content TEXT,
                                         ev_data JSONB, target BIGINT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    listened TIMESTAMPTZ;
BEGIN
    SELECT s.listened_until INTO listened
    FROM sessions AS s WHERE s.id = sid AND s.ended_at IS NULL
    FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF agent IS NOT NULL THEN
        PERFORM 1 FROM agents AS a
        WHERE a.uuid = agent AND a.session_id = sid AND a.status = 'running'
        FOR SHARE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF target IS NOT NULL THEN
        PERFORM 1 FROM messages AS m
        WHERE m.session_id = sid AND m.id = target
          AND CASE WHEN ev_kind = 'rewind' THEN m.kind = 'mark'
                   ELSE m.kind NOT IN ('clear', 'pop') END;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF (listened > ikigai_now()) IS TRUE THEN
        PERFORM ikigai_notify('ikigai_session', CAST(sid AS text));
    END IF;
    RETURN QUERY
        INSERT INTO messages AS e (session_id, agent_uuid, kind, content, data)
        VALUES (sid, agent, ev_kind, ev_content, ev_data)
        RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at;
END
$fn$;



-- activities_record's work (queries/activities.sql): the identity looked up by name (it must
-- exist and not be retired; no row otherwise), then the activity inserted with its id.
CREATE OR REPLACE FUNCTION ikigai_record_activity(who TEXT, act_type TEXT, act_description TEXT,
                                                  act_metadata JSONB)
RETURNS TABLE (id BIGINT, identity TEXT, type TEXT, description TEXT, metadata JSONB,
               created_at TIMESTAMPTZ)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    iid BIGINT;
BEGIN
    SELECT i.id INTO iid FROM identities AS i WHERE i.name = who AND i.retired_at IS NULL;
    IF iid IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        INSERT INTO activities AS a (identity_id, type, description, metadata)
        VALUES (iid, act_type, act_description, act_metadata)
        RETURNING a.id, who, a.type, a.description, a.metadata, a.created_at;
END
$fn$;

-- summaries_add's work (queries/summaries.sql), as ikigai_record_activity's.
CREATE OR REPLACE FUNCTION ikigai_add_summary(who TEXT, s_summary TEXT, s_delta TEXT,
                                              s_transcript_hash TEXT, s_cost_usd DOUBLE PRECISION)
RETURNS TABLE (id BIGINT, identity TEXT, summary TEXT, delta TEXT, transcript_hash TEXT,
               cost_usd DOUBLE PRECISION, created_at TIMESTAMPTZ)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    iid BIGINT;
BEGIN
    SELECT i.id INTO iid FROM identities AS i WHERE i.name = who AND i.retired_at IS NULL;
    IF iid IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        INSERT INTO agent_summaries AS s (identity_id, summary, delta, transcript_hash, cost_usd)
        VALUES (iid, s_summary, s_delta, s_transcript_hash, s_cost_usd)
        RETURNING s.id, who, s.summary, s.delta, s.transcript_hash, s.cost_usd, s.created_at;
END
$fn$;

-- 0033's langgraph_put.
CREATE OR REPLACE FUNCTION langgraph_put(
    p_thread_id TEXT, p_title TEXT, p_checkpoint_ns TEXT, p_checkpoint_id TEXT,
    p_parent_checkpoint_id TEXT, p_checkpoint JSONB, p_metadata JSONB, p_channels TEXT[],
    p_versions TEXT[], p_types TEXT[], p_blobs BYTEA[], p_bases TEXT[])
RETURNS TABLE (session_id BIGINT, missing TEXT[], stored BIGINT)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
    source BIGINT;
    l RECORD;
    held_c TEXT[];
    held_v TEXT[];
    lacking TEXT[];
    n BIGINT;
BEGIN
    SELECT t.session_id, t.source_session_id INTO sid, source
    FROM langgraph_threads AS t WHERE t.thread_id = p_thread_id
    FOR KEY SHARE;
    IF NOT FOUND THEN
        INSERT INTO sessions AS s (title) VALUES (p_title) RETURNING s.id INTO sid;
        INSERT INTO langgraph_threads (session_id, thread_id) VALUES (sid, p_thread_id);
    END IF;
    -- The channels whose base is not in the lineage: looked for among the thread's own blobs,
    -- then among each source's (up to its bound), each one session's rows.
    SELECT COALESCE(array_agg(w.channel), '{}') INTO lacking
    FROM unnest(p_channels, p_bases) AS w (channel, base) WHERE w.base IS NOT NULL;
    IF cardinality(lacking) > 0 THEN
        FOR l IN SELECT * FROM langgraph_lineage(sid) AS x
                 WHERE x.depth = 0 OR source IS NOT NULL ORDER BY x.depth LOOP
            SELECT COALESCE(array_agg(o.channel), '{}'), COALESCE(array_agg(o.version), '{}')
            INTO held_c, held_v
            FROM langgraph_blobs AS o
            WHERE o.session_id = l.session_id AND o.checkpoint_ns = p_checkpoint_ns
              AND o.channel = ANY (lacking) AND o.version = ANY (p_bases) AND o.id <= l.bound;
            SELECT COALESCE(array_agg(w.channel), '{}') INTO lacking
            FROM unnest(p_channels, p_bases) AS w (channel, base)
            WHERE w.channel = ANY (lacking)
              AND NOT EXISTS (SELECT 1 FROM unnest(held_c, held_v) AS h (channel, version)
                              WHERE h.channel = w.channel AND h.version = w.base);
            EXIT WHEN cardinality(lacking) = 0;
        END LOOP;
    END IF;
    INSERT INTO langgraph_checkpoints AS c (session_id, checkpoint_ns, checkpoint_id,
                                            parent_checkpoint_id, checkpoint, metadata)
    VALUES (sid, p_checkpoint_ns, p_checkpoint_id, p_parent_checkpoint_id, p_checkpoint,
            p_metadata)
    ON CONFLICT (session_id, checkpoint_ns, checkpoint_id) DO UPDATE
    SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
        checkpoint = EXCLUDED.checkpoint,
        metadata = EXCLUDED.metadata;
    INSERT INTO langgraph_blobs (session_id, checkpoint_ns, channel, version, type, blob,
                                 base_version)
    SELECT sid, p_checkpoint_ns, w.channel, w.version, w.type, w.blob, w.base
    FROM unnest(p_channels, p_versions, p_types, p_blobs, p_bases)
         AS w (channel, version, type, blob, base)
    WHERE NOT (w.channel = ANY (lacking))
    ON CONFLICT (session_id, checkpoint_ns, channel, version) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    session_id := sid;
    missing := lacking;
    stored := n;
    RETURN NEXT;
END
$fn$;

DROP FUNCTION IF EXISTS langgraph_put_writes(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, INTEGER[], TEXT[],
                                            TEXT[], BYTEA[], BOOLEAN);
DROP FUNCTION IF EXISTS ikigai_append_batch(BIGINT, TEXT, TEXT[], TEXT[], TEXT[]);
DROP FUNCTION IF EXISTS ikigai_append_id(BIGINT, TEXT, TEXT, BIGINT);
DROP FUNCTION IF EXISTS ikigai_append_lock(BIGINT, TEXT, BOOLEAN);
DROP FUNCTION IF EXISTS ikigai_append_refusal(BIGINT, TEXT);
DROP FUNCTION IF EXISTS ikigai_active_identity(TEXT, TEXT);
DROP FUNCTION IF EXISTS ikigai_is_distributed(TEXT);
UPDATE schema_metadata SET schema_version = 39 WHERE schema_version = 40;
