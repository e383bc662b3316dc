-- Claude Agent SDK transcripts (ikigai_store.transcripts; migration 0027): a transcript
-- (namespace, project_key, transcript_id, subpath; '' for the main one) is one of our sessions,
-- its entries that session's events.

-- name: claude_transcript_lock(namespace, project_key, transcript_id, subpath, title)^
-- The transcript's session, made (with :title) on first use, its transcript row locked FOR
-- UPDATE until the end of the transaction: appends to one transcript take turns, so the
-- deduplication by uuid and the summary's read-fold-write never race. When two first uses
-- race, the second fails on the key's uniqueness (Conflict) and is run again.
WITH found AS (
    SELECT session_id, summary, mtime
    FROM claude_transcripts
    WHERE namespace = :namespace AND project_key = :project_key
      AND transcript_id = :transcript_id AND subpath = :subpath
    FOR UPDATE
),
created AS (
    INSERT INTO sessions (title)
    SELECT :title WHERE NOT EXISTS (SELECT 1 FROM found)
    RETURNING id
),
named AS (
    INSERT INTO claude_transcripts (session_id, namespace, project_key, transcript_id, subpath)
    SELECT id, :namespace, :project_key, :transcript_id, :subpath FROM created
    RETURNING session_id, summary, mtime
)
SELECT session_id, summary, mtime FROM found
UNION ALL
SELECT session_id, summary, mtime FROM named;

-- name: claude_append_entries(session_id, kinds, contents, datas, summary)^
-- Append the entries (datas[i], JSON) as events of the session, in order, skipping every entry
-- whose uuid the session already has or an earlier entry of the batch has (the SDK retries a
-- batch: an entry is stored once). Entries without a uuid are always appended. The fresh
-- entries are stored as append_events stores a batch (ikigai_append_batch, migration 0040:
-- the session locked FOR UPDATE, consecutive ids, the wake-up of the servers showing it),
-- which raises for a missing (IK404) or ended (IK400) session; a batch with nothing fresh
-- stores nothing and checks nothing. Stamps the transcript's modification time (the
-- transaction's NOW(), as its new events' created_at) and stores :summary when not NULL.
-- Returns fresh (the entries kept) and appended. In steps (ikigai_claude_append, migration
-- 0041): on Citus, the uuids are read from the session's shard, the events sent to it as one
-- command.
SELECT fresh, appended
FROM ikigai_claude_append(CAST(:session_id AS bigint), CAST(:kinds AS text[]),
                          CAST(:contents AS text[]), CAST(:datas AS text[]),
                          CAST(:summary AS jsonb));

-- name: claude_load(namespace, project_key, transcript_id, subpath)
-- The transcript's events' data in id order (one row of NULL data when it has none); no row
-- at all when the transcript was never written (or was deleted).
SELECT t.session_id, m.data
FROM claude_transcripts AS t
LEFT JOIN messages AS m ON m.session_id = t.session_id
WHERE t.namespace = :namespace AND t.project_key = :project_key
  AND t.transcript_id = :transcript_id AND t.subpath = :subpath
ORDER BY m.id;

-- name: claude_list_transcripts(namespace, project_key)
-- The main transcripts of a project (no subpath): id, modification time and summary data.
SELECT transcript_id, mtime, summary
FROM claude_transcripts
WHERE namespace = :namespace AND project_key = :project_key AND subpath = ''
ORDER BY transcript_id;

-- name: claude_list_subpaths(namespace, project_key, transcript_id)
-- The subpaths (subagent transcripts) of a session, in order; the main one ('') excluded.
SELECT subpath
FROM claude_transcripts
WHERE namespace = :namespace AND project_key = :project_key
  AND transcript_id = :transcript_id AND subpath <> ''
ORDER BY subpath;

-- name: claude_delete(namespace, project_key, transcript_id, subpath)^
-- Delete a transcript (:subpath NULL: the main one and every subpath of the session): its
-- events are deleted, its session ended, its name freed (a later append starts afresh).
-- Returns how many transcripts and events went.
WITH gone AS (
    DELETE FROM claude_transcripts
    WHERE namespace = :namespace AND project_key = :project_key
      AND transcript_id = :transcript_id
      AND (CAST(:subpath AS text) IS NULL OR subpath = :subpath)
    RETURNING session_id
),
events AS (
    DELETE FROM messages WHERE session_id IN (SELECT session_id FROM gone)
    RETURNING 1
),
ended AS (
    UPDATE sessions SET ended_at = LEAST(ended_at, NOW())
    WHERE id IN (SELECT session_id FROM gone)
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS transcripts, (SELECT count(*) FROM events) AS events;
