-- Undo 0016: post_mail() goes. The mail, recipient rows and activities it wrote stay (they
-- belong to 0007 and 0011); queries of a release before 0016 write them inline again.
DROP FUNCTION IF EXISTS post_mail(TEXT, BIGINT, BIGINT[], TEXT[], TEXT, TEXT, TEXT, JSONB, TEXT,
                                  TEXT, JSONB, BIGINT, TIMESTAMPTZ, JSONB, TEXT, TEXT, BIGINT,
                                  BIGINT);
UPDATE schema_metadata SET schema_version = 15 WHERE schema_version = 16;
