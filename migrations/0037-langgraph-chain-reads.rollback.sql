-- Undo 0037: 0033's langgraph_blob_chain() and langgraph_list_checkpoints() again.
CREATE OR REPLACE FUNCTION langgraph_blob_chain(
    leaf BIGINT, ns TEXT, channels TEXT[], versions TEXT[], known_channels TEXT[],
    known_versions TEXT[])
RETURNS TABLE (channel TEXT, version TEXT, type TEXT, blob BYTEA, base_version TEXT)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    l RECORD;
    r RECORD;
    todo_c TEXT[];
    todo_v TEXT[];
    seen_c TEXT[] := COALESCE(known_channels, '{}');
    seen_v TEXT[] := COALESCE(known_versions, '{}');
    base_c TEXT[];
    base_v TEXT[];
BEGIN
    SELECT COALESCE(array_agg(w.channel), '{}'), COALESCE(array_agg(w.version), '{}')
    INTO todo_c, todo_v
    FROM unnest(channels, versions) AS w (channel, version)
    WHERE NOT EXISTS (SELECT 1 FROM unnest(seen_c, seen_v) AS k (channel, version)
                      WHERE k.channel = w.channel AND k.version = w.version);
    FOR l IN SELECT * FROM langgraph_lineage(leaf) AS x ORDER BY x.depth LOOP
        EXIT WHEN cardinality(todo_c) = 0;
        base_c := '{}';
        base_v := '{}';
        FOR r IN
            WITH RECURSIVE chain (channel, version, type, blob, base_version) AS (
                SELECT b.channel, b.version, b.type, b.blob, b.base_version
                FROM langgraph_blobs AS b
                JOIN unnest(todo_c, todo_v) AS want (channel, version)
                  ON b.channel = want.channel AND b.version = want.version
                WHERE b.session_id = l.session_id AND b.checkpoint_ns = ns AND b.id <= l.bound
                UNION
                SELECT b.channel, b.version, b.type, b.blob, b.base_version
                FROM chain AS c
                JOIN langgraph_blobs AS b
                  ON b.channel = c.channel AND b.version = c.base_version
                WHERE b.session_id = l.session_id AND b.checkpoint_ns = ns AND b.id <= l.bound
                  AND NOT EXISTS (SELECT 1 FROM unnest(seen_c, seen_v) AS k (channel, version)
                                  WHERE k.channel = c.channel AND k.version = c.base_version)
            )
            SELECT * FROM chain
        LOOP
            channel := r.channel; version := r.version; type := r.type; blob := r.blob;
            base_version := r.base_version;
            RETURN NEXT;
            seen_c := seen_c || r.channel;
            seen_v := seen_v || r.version;
            IF r.base_version IS NOT NULL THEN
                base_c := base_c || r.channel;
                base_v := base_v || r.base_version;
            END IF;
        END LOOP;
        -- What this session did not hold (asked for, or a base of what it held) is looked
        -- for in the next one (an older thread: a source never reads its copies).
        SELECT COALESCE(array_agg(w.channel), '{}'), COALESCE(array_agg(w.version), '{}')
        INTO todo_c, todo_v
        FROM (SELECT * FROM unnest(todo_c, todo_v) UNION SELECT * FROM unnest(base_c, base_v))
             AS w (channel, version)
        WHERE NOT EXISTS (SELECT 1 FROM unnest(seen_c, seen_v) AS k (channel, version)
                          WHERE k.channel = w.channel AND k.version = w.version);
    END LOOP;
END
$fn$;

CREATE OR REPLACE FUNCTION langgraph_list_checkpoints(
    p_thread_id TEXT, p_checkpoint_ns TEXT, p_filter JSONB, p_before TEXT, p_lim BIGINT)
RETURNS TABLE (session_id BIGINT, thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT,
               parent_checkpoint_id TEXT, checkpoint JSONB, metadata JSONB, task_ids TEXT[],
               write_channels TEXT[], write_types TEXT[], write_blobs BYTEA[],
               task_paths TEXT[], idxs INTEGER[])
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    t RECORD;
    l RECORD;
    r RECORD;
    v_leaf BIGINT[] := '{}';
    v_thread TEXT[] := '{}';
    v_depth INTEGER[] := '{}';
    v_ns TEXT[] := '{}';
    v_id TEXT[] := '{}';
    v_parent TEXT[] := '{}';
    v_checkpoint JSONB[] := '{}';
    v_metadata JSONB[] := '{}';
BEGIN
    FOR t IN SELECT th.session_id, th.thread_id FROM langgraph_threads AS th
             WHERE th.thread_id IS NOT NULL
               AND (p_thread_id IS NULL OR th.thread_id = p_thread_id) LOOP
        FOR l IN SELECT * FROM langgraph_lineage(t.session_id) AS x ORDER BY x.depth LOOP
            FOR r IN
                SELECT c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint,
                       c.metadata
                FROM langgraph_checkpoints AS c
                WHERE c.session_id = l.session_id AND c.id <= l.bound
                  AND (p_checkpoint_ns IS NULL OR c.checkpoint_ns = p_checkpoint_ns)
                  AND (p_filter IS NULL OR c.metadata @> p_filter)
                  AND (p_before IS NULL OR c.checkpoint_id < p_before)
                ORDER BY c.checkpoint_id DESC, c.checkpoint_ns
                LIMIT p_lim
            LOOP
                v_leaf := v_leaf || t.session_id;
                v_thread := v_thread || t.thread_id;
                v_depth := v_depth || l.depth;
                v_ns := v_ns || r.checkpoint_ns;
                v_id := v_id || r.checkpoint_id;
                v_parent := v_parent || r.parent_checkpoint_id;
                v_checkpoint := v_checkpoint || r.checkpoint;
                v_metadata := v_metadata || r.metadata;
            END LOOP;
        END LOOP;
    END LOOP;
    FOR r IN
        SELECT * FROM (
            SELECT DISTINCT ON (v.leaf, v.ns, v.id) v.*
            FROM unnest(v_leaf, v_thread, v_depth, v_ns, v_id, v_parent, v_checkpoint,
                        v_metadata) AS v (leaf, thread, depth, ns, id, parent, checkpoint,
                                          metadata)
            ORDER BY v.leaf, v.ns, v.id, v.depth
        ) AS visible
        ORDER BY visible.id DESC, visible.thread, visible.ns
        LIMIT p_lim
    LOOP
        session_id := r.leaf;
        thread_id := r.thread;
        checkpoint_ns := r.ns;
        checkpoint_id := r.id;
        parent_checkpoint_id := r.parent;
        checkpoint := r.checkpoint;
        metadata := r.metadata;
        SELECT array_agg(w.task_id), array_agg(w.channel), array_agg(w.type),
               array_agg(w.blob), array_agg(w.task_path), array_agg(w.idx)
        INTO task_ids, write_channels, write_types, write_blobs, task_paths, idxs
        FROM langgraph_pending_writes(r.leaf, r.ns, r.id) AS w;
        RETURN NEXT;
    END LOOP;
END
$fn$;

UPDATE schema_metadata SET schema_version = 36 WHERE schema_version = 37;
