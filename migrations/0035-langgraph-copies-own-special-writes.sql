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
-- depends: 0030-citus-distribution

-- What a copy reads: the special writes of a thread's sessions.
CREATE INDEX IF NOT EXISTS idx_langgraph_writes_special ON langgraph_writes (session_id)
    WHERE idx < 0;

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
    -- A new statement, a new snapshot: it sees what the puts that held the source committed.
    INSERT INTO langgraph_writes (session_id, checkpoint_ns, checkpoint_id, task_id, task_path,
                                  idx, channel, type, blob)
    SELECT DISTINCT ON (o.checkpoint_ns, o.checkpoint_id, o.task_id, o.idx)
           copy_id, o.checkpoint_ns, o.checkpoint_id, o.task_id, o.task_path, o.idx, o.channel,
           o.type, o.blob
    FROM langgraph_lineage(source_id) AS l
    JOIN langgraph_writes AS o
      ON o.session_id = l.session_id AND o.idx < 0 AND o.id <= l.bound
    ORDER BY o.checkpoint_ns, o.checkpoint_id, o.task_id, o.idx, l.depth;
    RETURN copy_id;
END
$fn$;

-- Existing copies: their own rows of the special writes they read from their sources.
INSERT INTO langgraph_writes (session_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx,
                              channel, type, blob)
SELECT v.copy_id, v.checkpoint_ns, v.checkpoint_id, v.task_id, v.task_path, v.idx, v.channel,
       v.type, v.blob
FROM langgraph_threads AS c
CROSS JOIN LATERAL (
    SELECT DISTINCT ON (o.checkpoint_ns, o.checkpoint_id, o.task_id, o.idx)
           c.session_id AS copy_id, l.depth, o.checkpoint_ns, o.checkpoint_id, o.task_id,
           o.task_path, o.idx, o.channel, o.type, o.blob
    FROM langgraph_lineage(c.session_id) AS l
    JOIN langgraph_writes AS o
      ON o.session_id = l.session_id AND o.idx < 0 AND o.id <= l.bound
    ORDER BY o.checkpoint_ns, o.checkpoint_id, o.task_id, o.idx, l.depth
) AS v
WHERE c.source_session_id IS NOT NULL AND v.depth > 0
ORDER BY c.session_id
ON CONFLICT DO NOTHING;

UPDATE schema_metadata SET schema_version = 35 WHERE schema_version < 35;
