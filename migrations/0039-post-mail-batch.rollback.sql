-- Undo 0039: the batch overload of post_mail() goes (publish_many's statement of 0.8.0-0037
-- calls the single-mail post_mail() per element).
DROP FUNCTION IF EXISTS post_mail(TEXT[], BIGINT, BIGINT[], TEXT[], TEXT[], TEXT[], TEXT[],
                                  JSONB[], JSONB[], TEXT[], BIGINT);
UPDATE schema_metadata SET schema_version = 38 WHERE schema_version = 39;
