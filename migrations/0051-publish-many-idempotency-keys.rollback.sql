-- Undo 0051: the keyed batch overload of post_mail() goes (0039's stays).
DROP FUNCTION IF EXISTS post_mail(TEXT[], BIGINT, BIGINT[], TEXT[], TEXT[], TEXT[], TEXT[],
                                  JSONB[], JSONB[], TEXT[], BIGINT, TEXT);

UPDATE schema_metadata SET schema_version = 50 WHERE schema_version = 51;
