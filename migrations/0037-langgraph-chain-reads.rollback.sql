-- Undo 0037: 0033's langgraph_blob_chain() again (a row at a time).
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

UPDATE schema_metadata SET schema_version = 35 WHERE schema_version = 37;
