-- A LangGraph copy is a deep copy of its source as it was when copied, also for the writes an
-- upsert replaces in place (the model test found it: tests/property/test_langgraph_model.py).
-- - A copy reads its source's rows up to a bound (migration 0027). Rows are immutable, except
--   the special writes (errors, interrupts: negative idx), which langgraph_put_writes replaces
--   in place when put again (LangGraph's upsert). Replaced in the source after a copy was made,
--   the copy saw the new value.
-- - Now langgraph_copy_thread() gives the copy its own rows of the special writes its lineage
--   shows (a few per task at most; plain writes, checkpoints and blobs are still read from the
--   source): an upsert in the source no longer reaches the copy, and one in the copy replaces
--   the copy's own row. It locks the source in one statement and copies in the next, so it
--   copies what every put that held the source before it committed (a statement's snapshot
--   would predate the lock wait).
-- - Existing copies get their rows now (what an earlier upsert replaced cannot be recovered).
-- - Every statement reads or writes one session's rows (0033's rule: on Citus each is routed
--   to that session's shard).
-- depends: 0033-citus-more-distributed

-- On Citus, this transaction builds an index on a distributed table and creates functions
-- (which Citus propagates to the workers over one connection per node): its shard commands run
-- one at a time.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
END
$$;

-- What a copy reads: the special writes of a thread's sessions.
CREATE INDEX IF NOT EXISTS idx_langgraph_writes_special ON langgraph_writes (session_id)
    WHERE idx < 0;

-- The special writes a thread shows (its lineage's, each session read up to its bound, one
-- session at a time: on Citus one shard each), with the depth of the session that holds the
-- one it shows (a thread's own shadows an inherited one with the same key).
CREATE OR REPLACE FUNCTION langgraph_special_writes(leaf BIGINT)
RETURNS TABLE (depth INTEGER, checkpoint_ns TEXT, checkpoint_id TEXT, task_id TEXT,
               task_path TEXT, idx INTEGER, channel TEXT, type TEXT, blob BYTEA)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    l RECORD;
    r RECORD;
    k_depths INTEGER[] := '{}';
    k_ns TEXT[] := '{}';
    k_ids TEXT[] := '{}';
    k_tasks TEXT[] := '{}';
    k_paths TEXT[] := '{}';
    k_idxs INTEGER[] := '{}';
    k_channels TEXT[] := '{}';
    k_types TEXT[] := '{}';
    k_blobs BYTEA[] := '{}';
BEGIN
    FOR l IN SELECT * FROM langgraph_lineage(leaf) AS x ORDER BY x.depth LOOP
        FOR r IN
            SELECT o.checkpoint_ns, o.checkpoint_id, o.task_id, o.task_path, o.idx, o.channel,
                   o.type, o.blob
            FROM langgraph_writes AS o
            WHERE o.session_id = l.session_id AND o.idx < 0 AND o.id <= l.bound
        LOOP
            CONTINUE WHEN l.depth > 0 AND EXISTS (
                SELECT 1 FROM unnest(k_ns, k_ids, k_tasks, k_idxs) AS s (ns, cid, task, idx)
                WHERE s.ns = r.checkpoint_ns AND s.cid = r.checkpoint_id
                  AND s.task = r.task_id AND s.idx = r.idx);
            k_depths := k_depths || l.depth;
            k_ns := k_ns || r.checkpoint_ns;
            k_ids := k_ids || r.checkpoint_id;
            k_tasks := k_tasks || r.task_id;
            k_paths := k_paths || r.task_path;
            k_idxs := k_idxs || r.idx;
            k_channels := k_channels || r.channel;
            k_types := k_types || r.type;
            k_blobs := k_blobs || r.blob;
        END LOOP;
    END LOOP;
    RETURN QUERY
        SELECT * FROM unnest(k_depths, k_ns, k_ids, k_tasks, k_paths, k_idxs, k_channels,
                             k_types, k_blobs);
END
$fn$;

-- Make thread p_target a copy of p_source: returns the copy's session id, NULL when the source
-- does not exist; unique_violation (langgraph_threads_thread_id_key) when the target exists.
CREATE OR REPLACE FUNCTION langgraph_copy_thread(p_source TEXT, p_target TEXT, p_title TEXT)
RETURNS BIGINT
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    source_id BIGINT;
    copy_id BIGINT;
BEGIN
    -- Puts in flight hold the source FOR KEY SHARE: they commit first, later ones wait for
    -- this copy and draw row ids above its bound.
    SELECT t.session_id INTO source_id FROM langgraph_threads AS t
    WHERE t.thread_id = p_source FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO sessions (title) VALUES (p_title) RETURNING id INTO copy_id;
    INSERT INTO langgraph_threads (session_id, thread_id, source_session_id, source_bound)
    VALUES (copy_id, p_target, source_id, nextval('langgraph_row_id'));
    -- New statements, new snapshots: they see what the puts that held the source committed.
    INSERT INTO langgraph_writes (session_id, checkpoint_ns, checkpoint_id, task_id, task_path,
                                  idx, channel, type, blob)
    SELECT copy_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.task_path, w.idx,
           w.channel, w.type, w.blob
    FROM langgraph_special_writes(source_id) AS w;
    RETURN copy_id;
END
$fn$;

-- Existing copies: their own rows of the special writes they read from their sources.
DO $$
DECLARE
    c BIGINT;
BEGIN
    FOR c IN SELECT session_id FROM langgraph_threads
             WHERE source_session_id IS NOT NULL ORDER BY session_id LOOP
        INSERT INTO langgraph_writes (session_id, checkpoint_ns, checkpoint_id, task_id,
                                      task_path, idx, channel, type, blob)
        SELECT c, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.task_path, w.idx, w.channel,
               w.type, w.blob
        FROM langgraph_special_writes(c) AS w
        WHERE w.depth > 0
        ON CONFLICT DO NOTHING;
    END LOOP;
END
$$;

UPDATE schema_metadata SET schema_version = 35 WHERE schema_version < 35;
