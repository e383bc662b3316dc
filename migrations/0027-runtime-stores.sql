-- Runtime stores (issue 35): LangGraph checkpoints and Claude Agent SDK transcripts.
--
-- LangGraph. A thread is one of our sessions (langgraph_threads.session_id; thread_id NULL once
-- the thread was deleted while a copy still reads from it: its session stays open then, so
-- retention never prunes what a copy reads; a deleted thread's session is ended). Its checkpoints, channel values
-- (blobs) and pending writes are rows keyed by that session, ids drawn from one sequence
-- (langgraph_row_id) so that one number bounds all three. copy_thread writes one row: the new
-- thread's source_session_id and source_bound say "and every row of the source (and of its own
-- sources) with id <= source_bound", so a copy costs O(1) rows whatever the source's length. A
-- lineage walk follows source_session_id, which only points at an older thread
-- (CHECK source_session_id < session_id), so it terminates. A blob with a base_version stores
-- only what was appended to the channel's list since that version (a step that adds one message
-- to a 1,000-message state writes one message); base_version < version (CHECK) makes every
-- chain of bases finite (compared byte by byte, COLLATE "C", as Python compares them).
--
-- Claude Agent SDK. A transcript (namespace, project_key, transcript_id = the SDK's session id,
-- subpath '' for the main one) is one of our sessions: its entries are that session's events
-- (data = the entry, unchanged), so search and replay see them. idx_messages_entry_uuid finds an
-- entry by its uuid within a session, which append's deduplication needs (the SDK retries).
-- depends: 0026-mail-hand-off

CREATE TABLE IF NOT EXISTS langgraph_threads (
    session_id BIGINT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    thread_id TEXT UNIQUE,
    source_session_id BIGINT REFERENCES langgraph_threads (session_id),
    source_bound BIGINT NOT NULL DEFAULT 0,
    CHECK (source_session_id IS NULL OR source_session_id < session_id)
);
CREATE INDEX IF NOT EXISTS idx_langgraph_threads_source ON langgraph_threads (source_session_id)
    WHERE source_session_id IS NOT NULL;

CREATE SEQUENCE IF NOT EXISTS langgraph_row_id;

CREATE TABLE IF NOT EXISTS langgraph_checkpoints (
    id BIGINT PRIMARY KEY DEFAULT nextval('langgraph_row_id'),
    session_id BIGINT NOT NULL REFERENCES langgraph_threads (session_id) ON DELETE CASCADE,
    checkpoint_ns TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL,
    UNIQUE (session_id, checkpoint_ns, checkpoint_id)
);
CREATE INDEX IF NOT EXISTS idx_langgraph_checkpoints_run ON langgraph_checkpoints
    ((metadata ->> 'run_id')) WHERE metadata ? 'run_id';

CREATE TABLE IF NOT EXISTS langgraph_blobs (
    id BIGINT PRIMARY KEY DEFAULT nextval('langgraph_row_id'),
    session_id BIGINT NOT NULL REFERENCES langgraph_threads (session_id) ON DELETE CASCADE,
    checkpoint_ns TEXT NOT NULL,
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    base_version TEXT,
    UNIQUE (session_id, checkpoint_ns, channel, version),
    CHECK (base_version IS NULL OR base_version COLLATE "C" < version COLLATE "C")
);

CREATE TABLE IF NOT EXISTS langgraph_writes (
    id BIGINT PRIMARY KEY DEFAULT nextval('langgraph_row_id'),
    session_id BIGINT NOT NULL REFERENCES langgraph_threads (session_id) ON DELETE CASCADE,
    checkpoint_ns TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BYTEA,
    UNIQUE (session_id, checkpoint_ns, checkpoint_id, task_id, idx)
);

-- The threads whose rows a thread reads, leaf first: (depth, session_id, bound), each session's
-- rows with id <= bound. A loop of primary-key lookups (PL/pgSQL: never inlined, so no caller's
-- plan, generic or not, can turn the walk into a scan of every thread). Terminates: each step
-- follows source_session_id, which is smaller than the session id it leaves (the CHECK above),
-- so the ids strictly decrease. No row: no such thread.
CREATE OR REPLACE FUNCTION langgraph_lineage(leaf BIGINT)
RETURNS TABLE (depth INTEGER, session_id BIGINT, bound BIGINT)
LANGUAGE plpgsql STABLE ROWS 2
AS $fn$
DECLARE
    current_id BIGINT := leaf;
    current_bound BIGINT := 9223372036854775807;
    step INTEGER := 0;
    source_id BIGINT;
    source_limit BIGINT;
BEGIN
    LOOP
        SELECT t.source_session_id, t.source_bound INTO source_id, source_limit
        FROM langgraph_threads AS t
        WHERE t.session_id = current_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        depth := step;
        session_id := current_id;
        bound := current_bound;
        RETURN NEXT;
        EXIT WHEN source_id IS NULL;
        current_bound := LEAST(current_bound, source_limit);
        current_id := source_id;
        step := step + 1;
    END LOOP;
END
$fn$;

-- The blob rows a thread needs to rebuild channels[i] at versions[i] in namespace ns: each
-- channel's blob at that version and, for a blob that is an append (base_version set), the
-- blobs of its bases, down to a full blob or to a (channel, version) the caller already holds
-- (known_channels[j], known_versions[j]). Terminates: a base is always an older version
-- (CHECK base_version < version) and UNION drops a row met twice (the same blob seen through a
-- copy and its source).
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

-- langgraph_put's statement (queries/langgraph.sql says what it does), in PL/pgSQL with a
-- generic plan: each connection plans it once and keeps the plan. Planned per call, as a
-- prepared statement with custom plans, its planning cost about as much as its execution
-- (measured: 680 us a put vs 360 us with the plan kept).
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

CREATE TABLE IF NOT EXISTS claude_transcripts (
    session_id BIGINT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    namespace TEXT NOT NULL,
    project_key TEXT NOT NULL,
    transcript_id TEXT NOT NULL,
    subpath TEXT NOT NULL DEFAULT '',
    mtime TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    summary JSONB,
    UNIQUE (namespace, project_key, transcript_id, subpath)
);

CREATE INDEX IF NOT EXISTS idx_messages_entry_uuid ON messages (session_id, (data ->> 'uuid'))
    WHERE data ? 'uuid';

UPDATE schema_metadata SET schema_version = 27 WHERE schema_version < 27;
