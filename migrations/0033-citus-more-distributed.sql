-- Citus (issue 36): more tables distributed by keys of their own. ikigai_distribute() (0030)
-- now also places LangGraph's checkpoint rows (migration 0027) and the activity feed and agent
-- summaries (0011) on the cluster, and becomes the caller of one placement function per area
-- (below); on plain PostgreSQL (and the embedded server) nothing changes, as in 0030. A
-- database migrated before citus was created in it is distributed later with `ikigai-store
-- citus distribute`: the rows of every table it distributes move to the shards.
--
-- The placement added here (the reasons are in docs/concepts/citus.md):
-- - langgraph_checkpoints, langgraph_blobs and langgraph_writes are hash-distributed by
--   session_id, colocated with messages: they are a thread's history (a thread is a session),
--   years of checkpoints of thousands of threads being the volume. A thread's rows live on its
--   session's shard, so a put, a put of writes, a get and a list of one thread are routed to
--   that shard (a copy also reads its sources' shards, one statement each).
--   - Their primary keys become (session_id, id): Citus requires the distribution column in
--     every unique key. id stays unique, drawn from the coordinator's langgraph_row_id, and a
--     copy's bound (an id) keeps its meaning: every write goes through the coordinator.
--   - Their foreign keys to langgraph_threads (a coordinator table) go, as messages' did. What
--     the keys guaranteed still holds, in the statements (queries/langgraph.sql): every insert
--     names the session of a langgraph_threads row it has just read or made, locked FOR KEY
--     SHARE (a delete of the thread takes FOR UPDATE, so it waits); and every statement that
--     deletes a langgraph_threads row deletes that thread's rows in the same transaction
--     (langgraph_delete_thread, langgraph_drop_unnamed, prune_session_row).
-- - activities and agent_summaries are hash-distributed by identity_id, colocated with each
--   other (a colocation group of their own): an identity's posts and reads go to its shard;
--   the feed across identities and pruning ask every shard.
--   - Their primary keys become (identity_id, id); id stays unique (the coordinator's
--     sequences), and the feed's order is still id.
--   - Their foreign keys to identities (a coordinator table) go. Identities are never deleted,
--     and every writer reads the identity first: activities_record and summaries_add look it
--     up by name (not retired) and insert with its id as a value; post_mail() inserts its
--     activity with the sender id its caller read; the task upsert with the owner's id.
--   - post_mail() (0016, 0026) becomes PL/pgSQL, with the same arguments and result: Citus
--     cannot plan a SQL function's parameterised statement on a distributed table.
-- From here, ikigai_distribute() calls one placement function per area (below): 0030's
-- (messages, as 0030 placed it), then this migration's; a later Citus migration adds its own.
-- Each is idempotent and returns one row per table it changed.
-- depends: 0032-wake-after-commit

-- The saver's statements (queries/langgraph.sql), as functions whose every statement reads or
-- writes one session's rows of the three tables: on Citus each is routed to that session's
-- shard (a copy's lineage: one routed statement per session of it), where 0027's single
-- statements joined coordinator rows with them and Citus cannot plan that. Same results on
-- plain PostgreSQL. Each terminates: the lineage is finite (0027), and each loop walks it or
-- the rows one statement returned.

-- langgraph_put (0027's statement, in steps): the thread's row locked FOR KEY SHARE (made,
-- with its session, on first use); the channels whose base is in no session of the lineage
-- (own blobs first, then each source's up to its bound); the checkpoint and the other blobs
-- inserted with the session id as a value.
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

-- langgraph_blob_chain (0027's recursive statement, one session at a time): the recursive walk
-- of bases runs within one session (on Citus, one shard); what a session does not hold is
-- looked for in the next session of the lineage (an older thread: a source never reads its
-- copies), with what was found so far counted as known. Terminates: each recursive step
-- follows base_version < version (0027's CHECK), UNION drops a row met twice, and the loop
-- walks the finite lineage.
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

-- A thread's pending writes for one checkpoint (of one namespace): each lineage session's
-- writes up to its bound, read one session at a time (on Citus: one shard each), a thread's
-- own write shadowing an inherited one with the same (task_id, idx); ordered by (task_id, idx).
CREATE OR REPLACE FUNCTION langgraph_pending_writes(leaf BIGINT, ns TEXT, cid TEXT)
RETURNS TABLE (task_id TEXT, idx INTEGER, channel TEXT, type TEXT, blob BYTEA, task_path TEXT)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    l RECORD;
    r RECORD;
    t_ids TEXT[] := '{}';
    t_idxs INTEGER[] := '{}';
    t_channels TEXT[] := '{}';
    t_types TEXT[] := '{}';
    t_blobs BYTEA[] := '{}';
    t_paths TEXT[] := '{}';
BEGIN
    FOR l IN SELECT * FROM langgraph_lineage(leaf) AS x ORDER BY x.depth LOOP
        FOR r IN
            SELECT DISTINCT ON (o.task_id, o.idx) o.task_id, o.idx, o.channel, o.type, o.blob,
                   o.task_path
            FROM langgraph_writes AS o
            WHERE o.session_id = l.session_id AND o.checkpoint_ns = ns
              AND o.checkpoint_id = cid AND o.id <= l.bound
            ORDER BY o.task_id, o.idx, o.id DESC
        LOOP
            CONTINUE WHEN l.depth > 0 AND EXISTS (
                SELECT 1 FROM unnest(t_ids, t_idxs) AS s (task_id, idx)
                WHERE s.task_id = r.task_id AND s.idx = r.idx);
            t_ids := t_ids || r.task_id;
            t_idxs := t_idxs || r.idx;
            t_channels := t_channels || r.channel;
            t_types := t_types || r.type;
            t_blobs := t_blobs || r.blob;
            t_paths := t_paths || r.task_path;
        END LOOP;
    END LOOP;
    RETURN QUERY
        SELECT w.task_id, w.idx, w.channel, w.type, w.blob, w.task_path
        FROM unnest(t_ids, t_idxs, t_channels, t_types, t_blobs, t_paths)
             AS w (task_id, idx, channel, type, blob, task_path)
        ORDER BY w.task_id, w.idx;
END
$fn$;

-- langgraph_get's work (queries/langgraph.sql says what it returns): the thread's newest
-- checkpoint of the namespace (or the one named) across its lineage, a thread's own shadowing
-- an inherited one with the same id; its pending writes; the blob rows of its channels.
CREATE OR REPLACE FUNCTION langgraph_get_checkpoint(
    p_thread_id TEXT, p_checkpoint_ns TEXT, p_checkpoint_id TEXT, p_known_channels TEXT[],
    p_known_versions TEXT[])
RETURNS TABLE (session_id BIGINT, checkpoint_id TEXT, parent_checkpoint_id TEXT,
               checkpoint JSONB, metadata JSONB, task_ids TEXT[], write_channels TEXT[],
               write_types TEXT[], write_blobs BYTEA[], task_paths TEXT[], idxs INTEGER[],
               blob_channels TEXT[], blob_versions TEXT[], blob_types TEXT[],
               blob_blobs BYTEA[], blob_bases TEXT[])
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
    l RECORD;
    r RECORD;
    best RECORD;
    have BOOLEAN := false;
BEGIN
    SELECT t.session_id INTO sid FROM langgraph_threads AS t WHERE t.thread_id = p_thread_id;
    IF sid IS NULL THEN
        RETURN;
    END IF;
    FOR l IN SELECT * FROM langgraph_lineage(sid) AS x ORDER BY x.depth LOOP
        SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, c.metadata INTO r
        FROM langgraph_checkpoints AS c
        WHERE c.session_id = l.session_id AND c.checkpoint_ns = p_checkpoint_ns
          AND c.id <= l.bound
          AND (p_checkpoint_id IS NULL OR c.checkpoint_id = p_checkpoint_id)
        ORDER BY c.checkpoint_id DESC
        LIMIT 1;
        IF FOUND THEN
            IF NOT have THEN
                best := r;
                have := true;
            ELSIF r.checkpoint_id > best.checkpoint_id THEN
                best := r;
            END IF;
        END IF;
    END LOOP;
    IF NOT have THEN
        RETURN;
    END IF;
    session_id := sid;
    checkpoint_id := best.checkpoint_id;
    parent_checkpoint_id := best.parent_checkpoint_id;
    checkpoint := best.checkpoint;
    metadata := best.metadata;
    SELECT array_agg(w.task_id), array_agg(w.channel), array_agg(w.type), array_agg(w.blob),
           array_agg(w.task_path), array_agg(w.idx)
    INTO task_ids, write_channels, write_types, write_blobs, task_paths, idxs
    FROM langgraph_pending_writes(sid, p_checkpoint_ns, best.checkpoint_id) AS w;
    SELECT array_agg(k.channel), array_agg(k.version), array_agg(k.type), array_agg(k.blob),
           array_agg(k.base_version)
    INTO blob_channels, blob_versions, blob_types, blob_blobs, blob_bases
    FROM langgraph_blob_chain(
        sid, p_checkpoint_ns,
        ARRAY(SELECT key FROM jsonb_each_text(best.checkpoint -> 'channel_versions')),
        ARRAY(SELECT value FROM jsonb_each_text(best.checkpoint -> 'channel_versions')),
        p_known_channels, p_known_versions) AS k;
    RETURN NEXT;
END
$fn$;

-- langgraph_list's work (queries/langgraph.sql says what it returns). Each thread's lineage is
-- read one session at a time (on Citus: one shard each; every thread's when p_thread_id is
-- NULL), at most p_lim rows of each (the page's rows of a thread are among them: a key
-- shadowed in one session is visible, with the same rank, in a nearer one).
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

-- A thread's rows (checkpoints, blobs, writes) go with its langgraph_threads row: one routed
-- delete of each table (their foreign keys' ON DELETE CASCADE does it on plain PostgreSQL; on
-- Citus the keys are gone and these deletes keep the promise). Called by the statements that
-- delete a thread, after its row is locked.
CREATE OR REPLACE FUNCTION langgraph_delete_rows(sid BIGINT)
RETURNS BIGINT
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    n BIGINT;
    total BIGINT := 0;
BEGIN
    DELETE FROM langgraph_writes WHERE session_id = sid;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;
    DELETE FROM langgraph_blobs WHERE session_id = sid;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;
    DELETE FROM langgraph_checkpoints WHERE session_id = sid;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN total + n;
END
$fn$;

-- langgraph_delete_thread's work (queries/langgraph.sql says what it does); returns how many
-- threads were deleted or unnamed (0 or 1).
CREATE OR REPLACE FUNCTION langgraph_delete_thread(p_thread_id TEXT)
RETURNS BIGINT
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    sid BIGINT;
BEGIN
    SELECT t.session_id INTO sid FROM langgraph_threads AS t WHERE t.thread_id = p_thread_id
    FOR UPDATE;
    IF sid IS NULL THEN
        RETURN 0;
    END IF;
    IF EXISTS (SELECT 1 FROM langgraph_threads AS d WHERE d.source_session_id = sid) THEN
        UPDATE langgraph_threads SET thread_id = NULL WHERE session_id = sid;
        RETURN 1;
    END IF;
    PERFORM langgraph_delete_rows(sid);
    DELETE FROM langgraph_threads WHERE session_id = sid;
    UPDATE sessions SET ended_at = LEAST(ended_at, NOW()) WHERE id = sid;
    RETURN 1;
END
$fn$;

-- langgraph_drop_unnamed's work: delete an unnamed thread no copy reads from, with its rows,
-- and end its session; 0 when it is named or a copy still reads from it.
CREATE OR REPLACE FUNCTION langgraph_drop_unnamed(sid BIGINT)
RETURNS BIGINT
LANGUAGE plpgsql VOLATILE
AS $fn$
BEGIN
    PERFORM 1 FROM langgraph_threads AS t
    WHERE t.session_id = sid AND t.thread_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM langgraph_threads AS d WHERE d.source_session_id = sid)
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    PERFORM langgraph_delete_rows(sid);
    DELETE FROM langgraph_threads WHERE session_id = sid;
    UPDATE sessions SET ended_at = LEAST(ended_at, NOW()) WHERE id = sid;
    RETURN 1;
END
$fn$;

-- langgraph_delete_for_runs's work: the checkpoints whose metadata.run_id is one of run_ids
-- (every thread's: on Citus every shard), then each one's writes (a routed delete each).
CREATE OR REPLACE FUNCTION langgraph_delete_for_runs(run_ids TEXT[])
RETURNS TABLE (checkpoints BIGINT, writes BIGINT)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    d RECORD;
    n BIGINT;
BEGIN
    checkpoints := 0;
    writes := 0;
    FOR d IN
        DELETE FROM langgraph_checkpoints AS c
        WHERE c.metadata ? 'run_id' AND c.metadata ->> 'run_id' = ANY (run_ids)
        RETURNING c.session_id, c.checkpoint_ns, c.checkpoint_id
    LOOP
        checkpoints := checkpoints + 1;
        DELETE FROM langgraph_writes AS w
        WHERE w.session_id = d.session_id AND w.checkpoint_ns = d.checkpoint_ns
          AND w.checkpoint_id = d.checkpoint_id;
        GET DIAGNOSTICS n = ROW_COUNT;
        writes := writes + n;
    END LOOP;
    RETURN NEXT;
END
$fn$;

-- langgraph_rebuild_latest's work (queries/langgraph.sql says what it does): the newest
-- checkpoint of each namespace of the old thread's lineage (read one session at a time), its
-- writes and the blob rows of its channels, written into a new thread's session (routed).
CREATE OR REPLACE FUNCTION langgraph_rebuild_latest(old BIGINT, p_thread_id TEXT, p_title TEXT)
RETURNS TABLE (session_id BIGINT, copied BIGINT)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
    l RECORD;
    r RECORD;
    k RECORD;
    n BIGINT;
    total BIGINT := 0;
    v_depth INTEGER[] := '{}';
    v_ns TEXT[] := '{}';
    v_id TEXT[] := '{}';
    v_parent TEXT[] := '{}';
    v_checkpoint JSONB[] := '{}';
    v_metadata JSONB[] := '{}';
BEGIN
    FOR l IN SELECT * FROM langgraph_lineage(old) AS x ORDER BY x.depth LOOP
        FOR r IN
            SELECT DISTINCT ON (c.checkpoint_ns) c.checkpoint_ns, c.checkpoint_id,
                   c.parent_checkpoint_id, c.checkpoint, c.metadata
            FROM langgraph_checkpoints AS c
            WHERE c.session_id = l.session_id AND c.id <= l.bound
            ORDER BY c.checkpoint_ns, c.checkpoint_id DESC
        LOOP
            v_depth := v_depth || l.depth;
            v_ns := v_ns || r.checkpoint_ns;
            v_id := v_id || r.checkpoint_id;
            v_parent := v_parent || r.parent_checkpoint_id;
            v_checkpoint := v_checkpoint || r.checkpoint;
            v_metadata := v_metadata || r.metadata;
        END LOOP;
    END LOOP;
    INSERT INTO sessions AS s (title) VALUES (p_title) RETURNING s.id INTO sid;
    INSERT INTO langgraph_threads (session_id, thread_id) VALUES (sid, p_thread_id);
    FOR k IN
        SELECT DISTINCT ON (v.ns) v.*
        FROM unnest(v_depth, v_ns, v_id, v_parent, v_checkpoint, v_metadata)
             AS v (depth, ns, id, parent, checkpoint, metadata)
        ORDER BY v.ns, v.id DESC, v.depth
    LOOP
        INSERT INTO langgraph_checkpoints (session_id, checkpoint_ns, checkpoint_id,
                                           parent_checkpoint_id, checkpoint, metadata)
        VALUES (sid, k.ns, k.id, k.parent, k.checkpoint, k.metadata);
        total := total + 1;
        FOR r IN SELECT * FROM langgraph_pending_writes(old, k.ns, k.id) LOOP
            INSERT INTO langgraph_writes (session_id, checkpoint_ns, checkpoint_id, task_id,
                                          task_path, idx, channel, type, blob)
            VALUES (sid, k.ns, k.id, r.task_id, r.task_path, r.idx, r.channel, r.type, r.blob);
            total := total + 1;
        END LOOP;
        FOR r IN
            SELECT DISTINCT ON (b.channel, b.version) b.*
            FROM langgraph_blob_chain(
                old, k.ns,
                ARRAY(SELECT key FROM jsonb_each_text(k.checkpoint -> 'channel_versions')),
                ARRAY(SELECT value FROM jsonb_each_text(k.checkpoint -> 'channel_versions')),
                CAST('{}' AS text[]), CAST('{}' AS text[])) AS b
        LOOP
            INSERT INTO langgraph_blobs (session_id, checkpoint_ns, channel, version, type,
                                         blob, base_version)
            VALUES (sid, k.ns, r.channel, r.version, r.type, r.blob, r.base_version);
            total := total + 1;
        END LOOP;
    END LOOP;
    session_id := sid;
    copied := total;
    RETURN NEXT;
END
$fn$;

-- post_mail() (0016, 0026) in PL/pgSQL, with the same arguments, rows and result: on Citus a
-- SQL function's parameterised statement that writes a distributed table (activities) cannot
-- be planned, and the activity is now its own statement, which names the sender (routed to
-- the sender's shard). Its rules for callers are 0016's: it reads no table, takes a new
-- snapshot per statement, and is called once per change from a CTE's select list.
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
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    written mail;
BEGIN
    IF cardinality(post_mail.recipient_ids) > 0 OR post_mail.topic_id IS NOT NULL THEN
        INSERT INTO mail AS x (thread_id, parent_id, sender_id, recipients, subject, body,
                               priority, deadline_at, attachments, metadata, idempotency_key,
                               request_hash, topic_id, log_offset)
        VALUES (post_mail.thread_id, post_mail.parent_id, post_mail.sender_id,
                post_mail.recipients, post_mail.subject, post_mail.body, post_mail.priority,
                post_mail.deadline_at, post_mail.attachments, post_mail.metadata,
                post_mail.idempotency_key, post_mail.request_hash, post_mail.topic_id,
                post_mail.log_offset)
        ON CONFLICT (sender_id, idempotency_key) DO NOTHING
        RETURNING x.* INTO written;
        IF written.id IS NOT NULL THEN
            INSERT INTO mail_recipients (mail_id, identity_id, state, read_at)
            SELECT written.id, r.id,
                   CASE WHEN r.id = ANY (post_mail.handed_ids) THEN 'read' ELSE 'unread' END,
                   CASE WHEN r.id = ANY (post_mail.handed_ids) THEN ikigai_now() END
            FROM unnest(post_mail.recipient_ids) AS r (id);
        END IF;
    END IF;
    IF post_mail.activity_type IS NOT NULL THEN
        INSERT INTO activities (identity_id, type, description, metadata)
        VALUES (post_mail.sender_id, post_mail.activity_type, post_mail.description,
                COALESCE(post_mail.activity_metadata, '{}')
                || jsonb_build_object('mail_id', written.id));
    END IF;
    IF written.id IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN written;
END
$fn$;

-- One activity of an identity, by id: a routed INSERT ... VALUES (on Citus, to the identity's
-- shard). The callers have checked the identity (identities are never deleted). Returns the
-- row's id.
CREATE OR REPLACE FUNCTION ikigai_insert_activity(who BIGINT, act_type TEXT, act_description TEXT,
                                                  act_metadata JSONB)
RETURNS BIGINT
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    new_id BIGINT;
BEGIN
    INSERT INTO activities AS a (identity_id, type, description, metadata)
    VALUES (who, act_type, act_description, act_metadata)
    RETURNING a.id INTO new_id;
    RETURN new_id;
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

-- One identity's feed (activities_feed_identity, activities_feed_identity_type): the identity
-- id read first, then one routed statement with it as a value (0011's index walks).
CREATE OR REPLACE FUNCTION ikigai_identity_feed(who TEXT, act_type TEXT, since TIMESTAMPTZ,
                                               before BIGINT, lim BIGINT)
RETURNS TABLE (id BIGINT, identity TEXT, type TEXT, description TEXT, metadata JSONB,
               created_at TIMESTAMPTZ)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    iid BIGINT;
BEGIN
    SELECT i.id INTO iid FROM identities AS i WHERE i.name = who;
    IF iid IS NULL THEN
        RETURN;
    END IF;
    IF act_type IS NULL THEN
        RETURN QUERY
            SELECT a.id, who, a.type, a.description, a.metadata, a.created_at
            FROM activities AS a
            WHERE a.identity_id = iid
              AND (a.identity_id, a.id) < (iid, COALESCE(before, 9223372036854775807))
              AND (a.identity_id, a.id) > (iid, 0)
              AND (since IS NULL OR a.created_at >= since)
            ORDER BY a.identity_id DESC, a.id DESC
            LIMIT lim;
    ELSE
        RETURN QUERY
            SELECT a.id, who, a.type, a.description, a.metadata, a.created_at
            FROM activities AS a
            WHERE a.identity_id = iid
              AND (a.identity_id, a.type, a.id)
                  < (iid, act_type, COALESCE(before, 9223372036854775807))
              AND (a.identity_id, a.type, a.id) > (iid, act_type, 0)
              AND (since IS NULL OR a.created_at >= since)
            ORDER BY a.identity_id DESC, a.type DESC, a.id DESC
            LIMIT lim;
    END IF;
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

-- summaries_history's work: the identity id read first, then one routed statement.
CREATE OR REPLACE FUNCTION ikigai_summary_history(who TEXT, lim BIGINT)
RETURNS TABLE (id BIGINT, identity TEXT, summary TEXT, delta TEXT, transcript_hash TEXT,
               cost_usd DOUBLE PRECISION, created_at TIMESTAMPTZ)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    iid BIGINT;
BEGIN
    SELECT i.id INTO iid FROM identities AS i WHERE i.name = who;
    IF iid IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT s.id, who, s.summary, s.delta, s.transcript_hash, s.cost_usd, s.created_at
        FROM agent_summaries AS s
        WHERE s.identity_id = iid
        ORDER BY s.id DESC
        LIMIT lim;
END
$fn$;

-- The placement, one function per area. 0030 (released in 0.8.0) defined ikigai_distribute()
-- as one body placing messages; each later Citus migration restated that whole body to add its
-- tables. From here, the placement is made by one function per area, each defined by the
-- migration that distributes that area and dropped by its rollback:
-- ikigai_distribute_NNNN_<area>() (NNNN that migration's number), returning one row per table
-- it changed and nothing when its tables are placed already. ikigai_distribute() becomes, once
-- and for all, the entry point: it checks for citus, takes the distributors' lock and calls
-- every area function of this schema in name order, that is in migration order, so a later
-- migration adds only its own function and its rollback drops only that. The area functions
-- assume both checks: call ikigai_distribute(), not them. (0030 itself is left as released:
-- a database migrated by 0.8.0 has applied it, and yoyo never runs it again.)
--
-- 0030's area, as 0030 placed it: the event store (messages), distributed by session_id.
CREATE OR REPLACE FUNCTION ikigai_distribute_0030_events()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    fk RECORD;
BEGIN
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

-- The one entry point (`ikigai-store citus distribute`, and the Citus migrations when citus
-- is there). The area functions are found by name (ikigai_distribute_ and a 4-digit migration
-- number, no arguments, in the current schema) and ordered by it in the "C" collation.
CREATE OR REPLACE FUNCTION ikigai_distribute()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    area RECORD;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'ikigai_distribute: the citus extension is not created in this database'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    -- One distributor at a time (a second waits, then finds the tables placed).
    PERFORM pg_advisory_xact_lock(hashtext('ikigai_distribute'));
    FOR area IN SELECT n.nspname, p.proname
                FROM pg_proc AS p
                JOIN pg_namespace AS n ON n.oid = p.pronamespace AND n.nspname = current_schema()
                WHERE p.proname ~ '^ikigai_distribute_[0-9]{4}_' AND p.pronargs = 0
                ORDER BY p.proname COLLATE "C" LOOP
        RETURN QUERY EXECUTE format('SELECT relation, made FROM %I.%I()',
                                    area.nspname, area.proname);
    END LOOP;
END
$fn$;

-- This migration's area (ikigai_distribute() calls it after 0030's, with its lock held and
-- citus checked): LangGraph's checkpoint rows, then the activity feed and agent summaries.
CREATE OR REPLACE FUNCTION ikigai_distribute_0033_langgraph_activities()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    fk RECORD;
    t TEXT;
BEGIN
    -- A thread's checkpoint rows, colocated with its session's events.
    FOREACH t IN ARRAY ARRAY['langgraph_checkpoints', 'langgraph_blobs', 'langgraph_writes'] LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_dist_partition
                              WHERE logicalrelid = t::regclass AND partmethod = 'h');
        FOR fk IN SELECT conname FROM pg_constraint
                  WHERE conrelid = t::regclass AND contype = 'f' LOOP
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, fk.conname);
        END LOOP;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = t::regclass AND conname = t || '_pkey'
                     AND cardinality(conkey) = 1) THEN
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (session_id, id)',
                           t, t || '_pkey');
        END IF;
        PERFORM create_distributed_table(t, 'session_id', colocate_with => 'messages');
        relation := t;
        made := 'distributed by session_id, colocated with messages';
        RETURN NEXT;
    END LOOP;
    -- An identity's activities and agent summaries, colocated with each other (a group of
    -- their own: identity ids and session ids are unrelated).
    FOREACH t IN ARRAY ARRAY['activities', 'agent_summaries'] LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_dist_partition
                              WHERE logicalrelid = t::regclass AND partmethod = 'h');
        FOR fk IN SELECT conname FROM pg_constraint
                  WHERE conrelid = t::regclass AND contype = 'f' LOOP
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, fk.conname);
        END LOOP;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = t::regclass AND conname = t || '_pkey'
                     AND cardinality(conkey) = 1) THEN
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (identity_id, id)',
                           t, t || '_pkey');
        END IF;
        IF t = 'activities' THEN
            PERFORM create_distributed_table(t, 'identity_id', colocate_with => 'none');
            made := 'distributed by identity_id';
        ELSE
            PERFORM create_distributed_table(t, 'identity_id', colocate_with => 'activities');
            made := 'distributed by identity_id, colocated with activities';
        END IF;
        relation := t;
        RETURN NEXT;
    END LOOP;
END
$fn$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM ikigai_distribute();
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 33 WHERE schema_version < 33;
