-- Undo 0046: mail.search_vector is a stored generated column again (the table is rewritten
-- and every vector recomputed, the mail of unsearchable topics included), and topics lose
-- their searchable setting.
DROP TRIGGER IF EXISTS mail_search_vector ON mail;
DROP FUNCTION IF EXISTS mail_search_vector();

DROP INDEX IF EXISTS mail_search_idx;
ALTER TABLE mail DROP COLUMN IF EXISTS search_vector;
ALTER TABLE mail ADD COLUMN search_vector TSVECTOR GENERATED ALWAYS AS (
    setweight(to_tsvector('english', left(subject, 10000)), 'A')
    || setweight(to_tsvector('english', left(body, 100000)), 'B')
) STORED;
CREATE INDEX IF NOT EXISTS mail_search_idx ON mail USING gin (search_vector);

ALTER TABLE topics DROP COLUMN IF EXISTS searchable;

UPDATE schema_metadata SET schema_version = 45 WHERE schema_version = 46;
