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
SELECT session_id, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, task_ids,
       write_channels, write_types, write_blobs, task_paths, idxs, blob_channels, blob_versions,
       blob_types, blob_blobs, blob_bases
FROM langgraph_get_checkpoint(:thread_id, :checkpoint_ns, :checkpoint_id,
                              CAST(:known_channels AS text[]), CAST(:known_versions AS text[]));

-- name: langgraph_list(thread_id, checkpoint_ns, filter, before, lim)
-- Checkpoints newest first (by checkpoint_id) with their pending writes: of one thread
-- (thread_id NULL: of every thread), of one namespace (NULL: all), whose metadata contains
-- :filter (jsonb @>), older than :before (a checkpoint_id; NULL: no bound), at most :lim (NULL:
-- all). A thread's own checkpoint shadows an inherited one with the same id. Channel values are
-- read next with langgraph_blobs_for.
SELECT session_id, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint,
       metadata, task_ids, write_channels, write_types, write_blobs, task_paths, idxs
FROM langgraph_list_checkpoints(:thread_id, :checkpoint_ns, CAST(:filter AS jsonb), :before,
                                CAST(:lim AS bigint));

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
-- source itself. Returns the thread's session id. Migration 0040's langgraph_put_writes()
-- (on Citus the writes reach the session's shard as one command).
SELECT session_id, stored
FROM langgraph_put_writes(:thread_id, :title, :checkpoint_ns, :checkpoint_id, :task_id,
                          :task_path, CAST(:idxs AS integer[]), CAST(:channels AS text[]),
                          CAST(:types AS text[]), CAST(:blobs AS bytea[]),
                          CAST(:upsert AS boolean));

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
SELECT langgraph_delete_thread(:thread_id) AS deleted;

-- name: langgraph_delete_for_runs(run_ids)^
-- Delete every checkpoint whose metadata.run_id is one of :run_ids, with its writes, in every
-- thread (a copy reading such a checkpoint from its source loses it too, as a full copy would
-- have been deleted too). Blobs stay: other checkpoints may still name them.
SELECT checkpoints, writes FROM langgraph_delete_for_runs(CAST(:run_ids AS text[]));

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
SELECT session_id, copied FROM langgraph_rebuild_latest(:old_session_id, :thread_id, :title);

-- name: langgraph_drop_unnamed(session_id)^
-- Delete an unnamed thread no copy reads from (its rows go with it, ON DELETE CASCADE) and end
-- its session; returns how many were deleted (0: it is named, or a copy still reads from it).
SELECT langgraph_drop_unnamed(:session_id) AS deleted;
