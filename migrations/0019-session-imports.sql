-- Moving sessions between databases (issue 21): session_imports records, for an import made
-- with --once (`store.import_session(file, once=True)`), the export_id of the file it came
-- from, so that importing the same file again is refused instead of making a second copy.
-- Deleting the imported session (prune_sessions) forgets it (ON DELETE CASCADE).
-- depends: 0018-timeline-controls

CREATE TABLE IF NOT EXISTS session_imports (
    export_id UUID PRIMARY KEY,
    session_id BIGINT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    imported_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS session_imports_session_idx ON session_imports (session_id);

UPDATE schema_metadata SET schema_version = 19 WHERE schema_version < 19;
