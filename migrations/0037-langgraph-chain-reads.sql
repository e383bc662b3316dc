-- A LangGraph thread's cold read reads its chain of appends by key again.
-- 0033's langgraph_blob_chain() (PL/pgSQL, one statement per session of the lineage) joined
-- the chain's next versions with the session's blob rows; planned as a nested loop whose outer
-- side was the session's every blob (its estimate: one row), each step of the chain read every
-- blob of the session: a channel built by 1,000 appends (a chat's messages, one per step) read
-- 25,000 rows for a 25-link chain, 4 ms of a cold read (11 ms against AsyncPostgresSaver's
-- 6.7 ms, where 0027's single statement was on par). Now each link is a lookup of the unique
-- key (session_id, checkpoint_ns, channel, version) in a LATERAL subquery (LIMIT 1: the key
-- is unique, and the limit keeps the planner from flattening it back into a join). Each
-- session's chain is collected by one statement (array_agg) and added to what was seen in one
-- append (0033 appended a row at a time, each append copying the array). Same arguments,
-- same rows; on Citus each statement still reads one session's rows (routed to its shard).
-- langgraph_list_checkpoints() (below) no longer runs a statement per thread to list every
-- thread's checkpoints.
-- depends: 0036-citus-tasks-by-list

CREATE OR REPLACE FUNCTION langgraph_blob_chain(
    leaf BIGINT, ns TEXT, channels TEXT[], versions TEXT[], known_channels TEXT[],
    known_versions TEXT[])
RETURNS TABLE (channel TEXT, version TEXT, type TEXT, blob BYTEA, base_version TEXT)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    l RECORD;
    todo_c TEXT[];
    todo_v TEXT[];
    seen_c TEXT[] := COALESCE(known_channels, '{}');
    seen_v TEXT[] := COALESCE(known_versions, '{}');
    got_c TEXT[];
    got_v TEXT[];
    got_t TEXT[];
    got_b BYTEA[];
    got_base TEXT[];
BEGIN
    SELECT COALESCE(array_agg(w.channel), '{}'), COALESCE(array_agg(w.version), '{}')
    INTO todo_c, todo_v
    FROM unnest(channels, versions) AS w (channel, version)
    WHERE NOT EXISTS (SELECT 1 FROM unnest(seen_c, seen_v) AS k (channel, version)
                      WHERE k.channel = w.channel AND k.version = w.version);
    FOR l IN SELECT * FROM langgraph_lineage(leaf) AS x ORDER BY x.depth LOOP
        EXIT WHEN cardinality(todo_c) = 0;
        -- This session's part of the chains: the blobs asked for, then their bases, up to a
        -- base this session does not hold or the caller already has.
        WITH RECURSIVE chain (channel, version, type, blob, base_version) AS (
            SELECT b.channel, b.version, b.type, b.blob, b.base_version
            FROM unnest(todo_c, todo_v) AS want (channel, version)
            CROSS JOIN LATERAL (
                SELECT x.channel, x.version, x.type, x.blob, x.base_version
                FROM langgraph_blobs AS x
                WHERE x.session_id = l.session_id AND x.checkpoint_ns = ns
                  AND x.channel = want.channel AND x.version = want.version
                  AND x.id <= l.bound
                LIMIT 1) AS b
            UNION
            SELECT b.channel, b.version, b.type, b.blob, b.base_version
            FROM chain AS c
            CROSS JOIN LATERAL (
                SELECT x.channel, x.version, x.type, x.blob, x.base_version
                FROM langgraph_blobs AS x
                WHERE x.session_id = l.session_id AND x.checkpoint_ns = ns
                  AND x.channel = c.channel AND x.version = c.base_version
                  AND x.id <= l.bound
                LIMIT 1) AS b
            WHERE NOT EXISTS (SELECT 1 FROM unnest(seen_c, seen_v) AS k (channel, version)
                              WHERE k.channel = c.channel AND k.version = c.base_version)
        )
        SELECT COALESCE(array_agg(c.channel), '{}'), COALESCE(array_agg(c.version), '{}'),
               COALESCE(array_agg(c.type), '{}'), COALESCE(array_agg(c.blob), '{}'),
               COALESCE(array_agg(c.base_version), '{}')
        INTO got_c, got_v, got_t, got_b, got_base
        FROM chain AS c;
        RETURN QUERY SELECT * FROM unnest(got_c, got_v, got_t, got_b, got_base);
        seen_c := seen_c || got_c;
        seen_v := seen_v || got_v;
        -- What this session did not hold (asked for, or a base of what it held) is looked
        -- for in the next one (an older thread: a source never reads its copies).
        SELECT COALESCE(array_agg(w.channel), '{}'), COALESCE(array_agg(w.version), '{}')
        INTO todo_c, todo_v
        FROM (SELECT * FROM unnest(todo_c, todo_v)
              UNION
              SELECT g.channel, g.base FROM unnest(got_c, got_base) AS g (channel, base)
              WHERE g.base IS NOT NULL) AS w (channel, version)
        WHERE NOT EXISTS (SELECT 1 FROM unnest(seen_c, seen_v) AS k (channel, version)
                          WHERE k.channel = w.channel AND k.version = w.version);
    END LOOP;
END
$fn$;

-- langgraph_list's work (queries/langgraph.sql says what it returns), as 0033's, with two
-- changes. Every thread's list (p_thread_id NULL) reads the threads' own rows in two
-- statements over all their sessions (on Citus: each asks every shard once): the cutoff, the
-- p_lim-th newest checkpoint_id, then every row at or above it (ties included: the final
-- order breaks them by thread); 0033 ran one statement per thread, 90 ms for 10 rows of 600
-- threads. Only copies then walk their lineages, one session at a time (inherited rows). And
-- each statement's rows are collected with array_agg, not appended one at a time (each append
-- copied the arrays: quadratic in the rows listed). One thread's list is read as in 0033: its
-- lineage, one routed statement per session.
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
    sids BIGINT[];
    cutoff TEXT;
    v_leaf BIGINT[] := '{}';
    v_depth INTEGER[] := '{}';
    v_ns TEXT[] := '{}';
    v_id TEXT[] := '{}';
    v_parent TEXT[] := '{}';
    v_checkpoint JSONB[] := '{}';
    v_metadata JSONB[] := '{}';
    g_session BIGINT[];
    g_ns TEXT[];
    g_id TEXT[];
    g_parent TEXT[];
    g_checkpoint JSONB[];
    g_metadata JSONB[];
BEGIN
    IF p_thread_id IS NULL THEN
        SELECT COALESCE(array_agg(th.session_id), '{}') INTO sids
        FROM langgraph_threads AS th WHERE th.thread_id IS NOT NULL;
        IF p_lim IS NOT NULL THEN
            SELECT c.checkpoint_id INTO cutoff
            FROM langgraph_checkpoints AS c
            WHERE c.session_id = ANY (sids)
              AND (p_checkpoint_ns IS NULL OR c.checkpoint_ns = p_checkpoint_ns)
              AND (p_filter IS NULL OR c.metadata @> p_filter)
              AND (p_before IS NULL OR c.checkpoint_id < p_before)
            ORDER BY c.checkpoint_id DESC
            OFFSET GREATEST(p_lim - 1, 0)
            LIMIT 1;
        END IF;
        SELECT COALESCE(array_agg(c.session_id), '{}'), COALESCE(array_agg(c.checkpoint_ns), '{}'),
               COALESCE(array_agg(c.checkpoint_id), '{}'),
               COALESCE(array_agg(c.parent_checkpoint_id), '{}'),
               COALESCE(array_agg(c.checkpoint), '{}'), COALESCE(array_agg(c.metadata), '{}')
        INTO g_session, g_ns, g_id, g_parent, g_checkpoint, g_metadata
        FROM langgraph_checkpoints AS c
        WHERE c.session_id = ANY (sids)
          AND (p_checkpoint_ns IS NULL OR c.checkpoint_ns = p_checkpoint_ns)
          AND (p_filter IS NULL OR c.metadata @> p_filter)
          AND (p_before IS NULL OR c.checkpoint_id < p_before)
          AND (cutoff IS NULL OR c.checkpoint_id >= cutoff);
        v_leaf := g_session;
        v_depth := array_fill(0, ARRAY[cardinality(g_session)]);
        v_ns := g_ns;
        v_id := g_id;
        v_parent := g_parent;
        v_checkpoint := g_checkpoint;
        v_metadata := g_metadata;
    END IF;
    FOR t IN SELECT th.session_id FROM langgraph_threads AS th
             WHERE th.thread_id IS NOT NULL
               AND (CASE WHEN p_thread_id IS NULL THEN th.source_session_id IS NOT NULL
                         ELSE th.thread_id = p_thread_id END) LOOP
        FOR l IN SELECT * FROM langgraph_lineage(t.session_id) AS x
                 WHERE p_thread_id IS NOT NULL OR x.depth > 0 ORDER BY x.depth LOOP
            SELECT COALESCE(array_agg(c.checkpoint_ns), '{}'),
                   COALESCE(array_agg(c.checkpoint_id), '{}'),
                   COALESCE(array_agg(c.parent_checkpoint_id), '{}'),
                   COALESCE(array_agg(c.checkpoint), '{}'),
                   COALESCE(array_agg(c.metadata), '{}')
            INTO g_ns, g_id, g_parent, g_checkpoint, g_metadata
            FROM (SELECT c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
                         c.checkpoint, c.metadata
                  FROM langgraph_checkpoints AS c
                  WHERE c.session_id = l.session_id AND c.id <= l.bound
                    AND (p_checkpoint_ns IS NULL OR c.checkpoint_ns = p_checkpoint_ns)
                    AND (p_filter IS NULL OR c.metadata @> p_filter)
                    AND (p_before IS NULL OR c.checkpoint_id < p_before)
                  ORDER BY c.checkpoint_id DESC, c.checkpoint_ns
                  LIMIT p_lim) AS c;
            v_leaf := v_leaf || array_fill(t.session_id, ARRAY[cardinality(g_id)]);
            v_depth := v_depth || array_fill(l.depth, ARRAY[cardinality(g_id)]);
            v_ns := v_ns || g_ns;
            v_id := v_id || g_id;
            v_parent := v_parent || g_parent;
            v_checkpoint := v_checkpoint || g_checkpoint;
            v_metadata := v_metadata || g_metadata;
        END LOOP;
    END LOOP;
    FOR r IN
        SELECT * FROM (
            SELECT DISTINCT ON (v.leaf, v.ns, v.id) v.*, th.thread_id AS thread
            FROM unnest(v_leaf, v_depth, v_ns, v_id, v_parent, v_checkpoint, v_metadata)
                 AS v (leaf, depth, ns, id, parent, checkpoint, metadata)
            JOIN langgraph_threads AS th ON th.session_id = v.leaf
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

UPDATE schema_metadata SET schema_version = 37 WHERE schema_version < 37;
