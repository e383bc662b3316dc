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
-- depends: 0035-langgraph-copies-own-special-writes

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

UPDATE schema_metadata SET schema_version = 37 WHERE schema_version < 37;
