-- LangGraph checkpoints (ikigai_store.checkpoints; migration 0027 says how threads, copies and
-- appended blobs are laid out). Every read goes through langgraph_lineage(), so a copy sees its
-- source's rows up to its bound and a thread's own rows shadow inherited ones with the same key.

-- name: langgraph_put(thread_id, title, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, channels, versions, types, blobs, bases)^
-- Store one checkpoint and the blobs of the channels it changed, in one statement; the thread
-- (and its session) is made on first use. The thread row is locked FOR KEY SHARE, so a
-- concurrent copy_thread (FOR UPDATE) waits for this put or is waited for: a copy's bound never
-- splits a put. A checkpoint put again replaces its body and metadata; a blob already stored
-- under (channel, version) is kept. A blob with a base (bases[i]: an append onto that version)
-- is stored only when its base is in the thread's lineage (looked for among the thread's own
-- blobs first, one index probe; then among its sources'); the channels refused so are
-- returned (missing), and the caller stores them whole. When two first uses of a thread race,
-- the second fails on thread_id's uniqueness (Conflict) and is run again. The statement is
-- migration 0027's langgraph_put() (PL/pgSQL, a generic plan kept per connection).
SELECT session_id, missing, stored
FROM langgraph_put(:thread_id, :title, :checkpoint_ns, :checkpoint_id, :parent_checkpoint_id,
                   CAST(:checkpoint AS jsonb), CAST(:metadata AS jsonb),
                   CAST(:channels AS text[]), CAST(:versions AS text[]), CAST(:types AS text[]),
                   CAST(:blobs AS bytea[]), CAST(:bases AS text[]));

-- name: langgraph_get(thread_id, checkpoint_ns, checkpoint_id, known_channels, known_versions)^
-- One checkpoint (checkpoint_id NULL: the newest of the namespace) with everything get_tuple
-- needs, in one round trip at any depth of copies: its body and metadata, its pending writes
-- (a thread's own write shadows an inherited one with the same task_id and idx) and the blob
-- rows that rebuild its channels (langgraph_blob_chain; the caller names the blobs it holds
-- already). Nothing when there is no such thread or checkpoint.
WITH thread AS MATERIALIZED (
    SELECT session_id FROM langgraph_threads WHERE thread_id = :thread_id
),
lineage AS MATERIALIZED (
    SELECT l.* FROM thread AS t CROSS JOIN LATERAL langgraph_lineage(t.session_id) AS l
),
checkpoint AS (
    SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, c.metadata
    FROM lineage AS l
    JOIN langgraph_checkpoints AS c
      ON c.session_id = l.session_id AND c.checkpoint_ns = :checkpoint_ns AND c.id <= l.bound
    WHERE CAST(:checkpoint_id AS text) IS NULL OR c.checkpoint_id = :checkpoint_id
    ORDER BY c.checkpoint_id DESC, l.depth
    LIMIT 1
)
SELECT (SELECT session_id FROM thread) AS session_id,
       c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, c.metadata,
       w.task_ids, w.channels AS write_channels, w.types AS write_types,
       w.blobs AS write_blobs, w.task_paths, w.idxs,
       b.channels AS blob_channels, b.versions AS blob_versions, b.types AS blob_types,
       b.blobs AS blob_blobs, b.bases AS blob_bases
FROM checkpoint AS c
CROSS JOIN LATERAL (
    SELECT array_agg(x.task_id) AS task_ids, array_agg(x.channel) AS channels,
           array_agg(x.type) AS types, array_agg(x.blob) AS blobs,
           array_agg(x.task_path) AS task_paths, array_agg(x.idx) AS idxs
    FROM (
        SELECT DISTINCT ON (o.task_id, o.idx) o.task_id, o.idx, o.channel, o.type, o.blob,
               o.task_path
        FROM lineage AS l
        JOIN langgraph_writes AS o
          ON o.session_id = l.session_id AND o.checkpoint_ns = :checkpoint_ns
         AND o.checkpoint_id = c.checkpoint_id AND o.id <= l.bound
        ORDER BY o.task_id, o.idx, l.depth, o.id DESC
    ) AS x
) AS w
CROSS JOIN LATERAL (
    SELECT array_agg(k.channel) AS channels, array_agg(k.version) AS versions,
           array_agg(k.type) AS types, array_agg(k.blob) AS blobs,
           array_agg(k.base_version) AS bases
    FROM langgraph_blob_chain(
        (SELECT session_id FROM thread), :checkpoint_ns,
        ARRAY(SELECT key FROM jsonb_each_text(c.checkpoint -> 'channel_versions')),
        ARRAY(SELECT value FROM jsonb_each_text(c.checkpoint -> 'channel_versions')),
        CAST(:known_channels AS text[]), CAST(:known_versions AS text[])) AS k
) AS b;

-- name: langgraph_list(thread_id, checkpoint_ns, filter, before, lim)
-- Checkpoints newest first (by checkpoint_id) with their pending writes: of one thread
-- (thread_id NULL: of every thread), of one namespace (NULL: all), whose metadata contains
-- :filter (jsonb @>), older than :before (a checkpoint_id; NULL: no bound), at most :lim (NULL:
-- all). A thread's own checkpoint shadows an inherited one with the same id. Channel values are
-- read next with langgraph_blobs_for.
WITH threads AS MATERIALIZED (
    SELECT session_id, thread_id FROM langgraph_threads
    WHERE thread_id IS NOT NULL
      AND (CAST(:thread_id AS text) IS NULL OR thread_id = :thread_id)
),
lineages AS MATERIALIZED (
    SELECT t.session_id AS leaf, t.thread_id, l.depth, l.session_id, l.bound
    FROM threads AS t
    CROSS JOIN LATERAL langgraph_lineage(t.session_id) AS l
),
visible AS (
    SELECT DISTINCT ON (l.leaf, c.checkpoint_ns, c.checkpoint_id)
           l.leaf AS session_id, l.thread_id, c.checkpoint_ns, c.checkpoint_id,
           c.parent_checkpoint_id, c.checkpoint, c.metadata
    FROM lineages AS l
    JOIN langgraph_checkpoints AS c ON c.session_id = l.session_id AND c.id <= l.bound
    WHERE (CAST(:checkpoint_ns AS text) IS NULL OR c.checkpoint_ns = :checkpoint_ns)
      AND (CAST(:filter AS jsonb) IS NULL OR c.metadata @> CAST(:filter AS jsonb))
      AND (CAST(:before AS text) IS NULL OR c.checkpoint_id < :before)
    ORDER BY l.leaf, c.checkpoint_ns, c.checkpoint_id, l.depth
),
page AS (
    SELECT * FROM visible
    ORDER BY checkpoint_id DESC, thread_id, checkpoint_ns
    LIMIT (SELECT CAST(:lim AS bigint))
)
SELECT p.session_id, p.thread_id, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id,
       p.checkpoint, p.metadata,
       w.task_ids, w.channels AS write_channels, w.types AS write_types,
       w.blobs AS write_blobs, w.task_paths, w.idxs
FROM page AS p
CROSS JOIN LATERAL (
    SELECT array_agg(x.task_id) AS task_ids, array_agg(x.channel) AS channels,
           array_agg(x.type) AS types, array_agg(x.blob) AS blobs,
           array_agg(x.task_path) AS task_paths, array_agg(x.idx) AS idxs
    FROM (
        SELECT DISTINCT ON (o.task_id, o.idx) o.task_id, o.idx, o.channel, o.type, o.blob,
               o.task_path
        FROM lineages AS l
        JOIN langgraph_writes AS o
          ON o.session_id = l.session_id AND o.checkpoint_ns = p.checkpoint_ns
         AND o.checkpoint_id = p.checkpoint_id AND o.id <= l.bound
        WHERE l.leaf = p.session_id
        ORDER BY o.task_id, o.idx, l.depth, o.id DESC
    ) AS x
) AS w
ORDER BY p.checkpoint_id DESC, p.thread_id, p.checkpoint_ns;

-- name: langgraph_blobs_for(session_id, checkpoint_ns, channels, versions, known_channels, known_versions)
-- The blob rows that rebuild channels[i] at versions[i] in one namespace of a thread (by its
-- session), minus what the caller holds (langgraph_blob_chain).
SELECT channel, version, type, blob, base_version
FROM langgraph_blob_chain(:session_id, :checkpoint_ns, CAST(:channels AS text[]),
                          CAST(:versions AS text[]), CAST(:known_channels AS text[]),
                          CAST(:known_versions AS text[]));

-- name: langgraph_put_writes(thread_id, title, checkpoint_ns, checkpoint_id, task_id, task_path, idxs, channels, types, blobs, upsert)^
-- Store a task's writes for a checkpoint in one statement (the thread made on first use, as by
-- langgraph_put). A write already stored under (task_id, idx) is kept, or replaced when
-- :upsert (the special channels: errors, interrupts, whose idx is negative). On a copy, a write
-- it inherited counts as stored: a plain write under the same (task_id, idx) is not added
-- (it would shadow the inherited one: langgraph_get reads the thread's own first), as on the
-- source itself. Returns the thread's session id.
WITH found AS (
    SELECT session_id, source_session_id FROM langgraph_threads
    WHERE thread_id = :thread_id FOR KEY SHARE
),
created AS (
    INSERT INTO sessions (title)
    SELECT :title WHERE NOT EXISTS (SELECT 1 FROM found)
    RETURNING id
),
named AS (
    INSERT INTO langgraph_threads (session_id, thread_id)
    SELECT id, :thread_id FROM created
    RETURNING session_id
),
thread AS (
    SELECT session_id, source_session_id FROM found
    UNION ALL SELECT session_id, NULL FROM named
),
stored AS (
    INSERT INTO langgraph_writes (session_id, checkpoint_ns, checkpoint_id, task_id, task_path,
                                  idx, channel, type, blob)
    SELECT t.session_id, :checkpoint_ns, :checkpoint_id, :task_id, :task_path, w.idx, w.channel,
           w.type, w.blob
    FROM thread AS t
    CROSS JOIN unnest(CAST(:idxs AS integer[]), CAST(:channels AS text[]),
                      CAST(:types AS text[]), CAST(:blobs AS bytea[])) AS w (idx, channel, type,
                                                                             blob)
    WHERE CAST(:upsert AS boolean) OR t.source_session_id IS NULL
       OR NOT EXISTS (
           SELECT 1
           FROM langgraph_lineage(t.session_id) AS l
           JOIN langgraph_writes AS o
             ON o.session_id = l.session_id AND o.checkpoint_ns = :checkpoint_ns
            AND o.checkpoint_id = :checkpoint_id AND o.task_id = :task_id AND o.idx = w.idx
            AND o.id <= l.bound
           WHERE l.depth > 0)
    ON CONFLICT (session_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
    SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path
    WHERE CAST(:upsert AS boolean)
    RETURNING 1
)
SELECT session_id, (SELECT count(*) FROM stored) AS stored FROM thread;

-- name: langgraph_copy_thread(source_thread_id, target_thread_id, title)^
-- Make target a copy of source (migration 0035's langgraph_copy_thread): a new thread (and
-- session) reading the source's rows (and its sources') up to a bound drawn after the source's
-- row is locked FOR UPDATE: puts in flight (FOR KEY SHARE) finish first and later ones draw
-- higher ids, so the copy holds exactly what was committed. Its own rows: the special writes
-- (negative idx) it would read, which a put in the source may replace in place. Nothing when
-- the source does not exist; Conflict (langgraph_threads_thread_id_key) when the target exists.
SELECT c.session_id
FROM langgraph_copy_thread(:source_thread_id, :target_thread_id, :title) AS c (session_id)
WHERE c.session_id IS NOT NULL;

-- name: langgraph_delete_thread(thread_id)^
-- Delete a thread: its rows go with its langgraph_threads row (ON DELETE CASCADE) and its
-- session is ended. When a copy still reads from it, only its name goes (thread_id NULL): the
-- rows stay for the copy, and the session stays open (retention prunes only ended ones).
-- Returns how many threads were deleted (0 or 1).
WITH target AS (
    SELECT t.session_id,
           EXISTS (SELECT 1 FROM langgraph_threads AS d
                   WHERE d.source_session_id = t.session_id) AS copied
    FROM langgraph_threads AS t
    WHERE t.thread_id = :thread_id
    FOR UPDATE
),
unnamed AS (
    UPDATE langgraph_threads SET thread_id = NULL
    WHERE session_id IN (SELECT session_id FROM target WHERE copied)
    RETURNING session_id
),
gone AS (
    DELETE FROM langgraph_threads
    WHERE session_id IN (SELECT session_id FROM target WHERE NOT copied)
    RETURNING session_id
),
ended AS (
    UPDATE sessions SET ended_at = LEAST(ended_at, NOW())
    WHERE id IN (SELECT session_id FROM target WHERE NOT copied)
    RETURNING id
)
SELECT (SELECT count(*) FROM unnamed) + (SELECT count(*) FROM gone) AS deleted;

-- name: langgraph_delete_for_runs(run_ids)^
-- Delete every checkpoint whose metadata.run_id is one of :run_ids, with its writes, in every
-- thread (a copy reading such a checkpoint from its source loses it too, as a full copy would
-- have been deleted too). Blobs stay: other checkpoints may still name them.
WITH doomed AS (
    DELETE FROM langgraph_checkpoints
    WHERE metadata ? 'run_id' AND metadata ->> 'run_id' = ANY (CAST(:run_ids AS text[]))
    RETURNING session_id, checkpoint_ns, checkpoint_id
),
writes AS (
    DELETE FROM langgraph_writes AS w
    USING doomed AS d
    WHERE w.session_id = d.session_id AND w.checkpoint_ns = d.checkpoint_ns
      AND w.checkpoint_id = d.checkpoint_id
    RETURNING 1
)
SELECT (SELECT count(*) FROM doomed) AS checkpoints, (SELECT count(*) FROM writes) AS writes;

-- name: langgraph_unname(thread_id)^
-- Take a thread's name away (thread_id NULL), its row locked FOR UPDATE (puts and copies of it
-- wait); returns its session id, or nothing when there is no such thread. prune's first step.
UPDATE langgraph_threads SET thread_id = NULL
WHERE session_id = (SELECT session_id FROM langgraph_threads WHERE thread_id = :thread_id
                    FOR UPDATE)
RETURNING session_id;

-- name: langgraph_rebuild_latest(old_session_id, thread_id, title)^
-- prune(keep_latest)'s second step: a new thread (and session) named :thread_id gets the
-- newest checkpoint of each namespace of the old thread's lineage, their writes and the blob
-- rows that rebuild their channels (bases included). Returns the new session id and how many
-- rows were copied (the old thread is langgraph_drop_unnamed's business).
WITH lineage AS MATERIALIZED (
    SELECT * FROM langgraph_lineage(:old_session_id)
),
kept AS MATERIALIZED (
    SELECT DISTINCT ON (c.checkpoint_ns) c.checkpoint_ns, c.checkpoint_id,
           c.parent_checkpoint_id, c.checkpoint, c.metadata
    FROM lineage AS l
    JOIN langgraph_checkpoints AS c ON c.session_id = l.session_id AND c.id <= l.bound
    ORDER BY c.checkpoint_ns, c.checkpoint_id DESC, l.depth
),
kept_writes AS MATERIALIZED (
    SELECT DISTINCT ON (k.checkpoint_ns, o.task_id, o.idx) k.checkpoint_ns, k.checkpoint_id,
           o.task_id, o.task_path, o.idx, o.channel, o.type, o.blob
    FROM kept AS k
    JOIN lineage AS l ON true
    JOIN langgraph_writes AS o
      ON o.session_id = l.session_id AND o.checkpoint_ns = k.checkpoint_ns
     AND o.checkpoint_id = k.checkpoint_id AND o.id <= l.bound
    ORDER BY k.checkpoint_ns, o.task_id, o.idx, l.depth, o.id DESC
),
kept_blobs AS MATERIALIZED (
    SELECT DISTINCT ON (k.checkpoint_ns, b.channel, b.version) k.checkpoint_ns, b.channel,
           b.version, b.type, b.blob, b.base_version
    FROM kept AS k
    CROSS JOIN LATERAL langgraph_blob_chain(
        :old_session_id, k.checkpoint_ns,
        ARRAY(SELECT key FROM jsonb_each_text(k.checkpoint -> 'channel_versions')),
        ARRAY(SELECT value FROM jsonb_each_text(k.checkpoint -> 'channel_versions')),
        CAST('{}' AS text[]), CAST('{}' AS text[])) AS b
),
created AS (
    INSERT INTO sessions (title) VALUES (:title)
    RETURNING id
),
named AS (
    INSERT INTO langgraph_threads (session_id, thread_id)
    SELECT id, :thread_id FROM created
    RETURNING session_id
),
checkpoints AS (
    INSERT INTO langgraph_checkpoints (session_id, checkpoint_ns, checkpoint_id,
                                       parent_checkpoint_id, checkpoint, metadata)
    SELECT n.session_id, k.checkpoint_ns, k.checkpoint_id, k.parent_checkpoint_id,
           k.checkpoint, k.metadata
    FROM named AS n CROSS JOIN kept AS k
    RETURNING 1
),
writes AS (
    INSERT INTO langgraph_writes (session_id, checkpoint_ns, checkpoint_id, task_id, task_path,
                                  idx, channel, type, blob)
    SELECT n.session_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.task_path, w.idx,
           w.channel, w.type, w.blob
    FROM named AS n CROSS JOIN kept_writes AS w
    RETURNING 1
),
blobs AS (
    INSERT INTO langgraph_blobs (session_id, checkpoint_ns, channel, version, type, blob,
                                 base_version)
    SELECT n.session_id, b.checkpoint_ns, b.channel, b.version, b.type, b.blob, b.base_version
    FROM named AS n CROSS JOIN kept_blobs AS b
    RETURNING 1
)
SELECT n.session_id,
       (SELECT count(*) FROM checkpoints) + (SELECT count(*) FROM writes)
       + (SELECT count(*) FROM blobs) AS copied
FROM named AS n;

-- name: langgraph_drop_unnamed(session_id)^
-- Delete an unnamed thread no copy reads from (its rows go with it, ON DELETE CASCADE) and end
-- its session; returns how many were deleted (0: it is named, or a copy still reads from it).
WITH gone AS (
    DELETE FROM langgraph_threads AS t
    WHERE t.session_id = :session_id AND t.thread_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM langgraph_threads AS d
                      WHERE d.source_session_id = t.session_id)
    RETURNING t.session_id
),
ended AS (
    UPDATE sessions SET ended_at = LEAST(ended_at, NOW())
    WHERE id IN (SELECT session_id FROM gone)
    RETURNING id
)
SELECT count(*) AS deleted FROM gone;
