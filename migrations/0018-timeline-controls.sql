-- The web view's timeline (issue 20): idx_messages_session_controls indexes, by session, only
-- the events that decide what replay keeps (mark, rewind, clear). The timeline shows which
-- events a rewind cut and which a clear walled off by folding those events alone (a handful in
-- a session of 100,000; ikigai_store/web/timeline.py), so a page of a big session costs what a
-- page of a small one does. Runs outside a transaction so that a big table stays writable: the
-- index is built CONCURRENTLY (an invalid one left by an interrupted build is dropped and built
-- again: applying the migration again resumes). Rollback drops the index.
-- transactional: false
-- depends: 0017-watch-and-notify

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('idx_messages_session_controls')
                 AND NOT indisvalid) THEN
        DROP INDEX idx_messages_session_controls;
    END IF;
END
$$;

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_session_controls ON messages (session_id, id)
    WHERE kind IN ('mark', 'rewind', 'clear');

UPDATE schema_metadata SET schema_version = 18 WHERE schema_version < 18;
