-- Undo 0006: index whole contents again. Fails (and changes nothing) if some content is too
-- large for a tsvector, which 0006 made storable.
DROP INDEX IF EXISTS idx_messages_search;
CREATE INDEX idx_messages_search ON messages USING gin (to_tsvector('english', content));
UPDATE schema_metadata SET schema_version = 5 WHERE schema_version = 6;
