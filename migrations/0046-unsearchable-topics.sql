-- Topics created unsearchable (issue 38): a topic's mail may skip its full-text vector.
-- - topics.searchable (default true, so every existing topic stays as it was): fixed at the
--   topic's creation (store.topics.create(..., searchable=False)).
-- - mail.search_vector was a stored generated column (0007): every mail, a queue's job
--   payloads included, parsed its subject and body (to_tsvector of up to 100,000 characters)
--   and added them to the GIN index mail_search_idx. For a 1 KB body that is more than half of
--   a mail row's insert (scripts/probe_publish_floor.py). The column keeps its values and its
--   index, but is now kept by the trigger mail_search_vector: the same expression, except for
--   the mail of an unsearchable topic, whose vector is NULL (no parse, no GIN entries). Search
--   never finds such mail; everything else reads it as before.
-- - The trigger runs on every insert and on every update of subject, body, topic_id or
--   search_vector, as messages' does (0015): no writer can store a vector that disagrees with
--   the content and the topic's setting (the generated column refused one).
-- - DROP EXPRESSION changes the catalog only (no rewrite, existing vectors kept); mail is a
--   table of the coordinator on Citus (not distributed), where a trigger is allowed.
-- depends: 0045-append-many-idempotency-keys

ALTER TABLE topics ADD COLUMN IF NOT EXISTS searchable BOOLEAN NOT NULL DEFAULT true;

ALTER TABLE mail ALTER COLUMN search_vector DROP EXPRESSION IF EXISTS;

CREATE OR REPLACE FUNCTION mail_search_vector() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF NEW.topic_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM topics AS t WHERE t.id = NEW.topic_id AND t.searchable) THEN
        NEW.search_vector := NULL;
    ELSE
        -- 0007's expression: subject weighs more than body (A > B); bounded prefixes keep a
        -- tsvector under its 1 MB cap.
        NEW.search_vector := setweight(to_tsvector('english', left(NEW.subject, 10000)), 'A')
                             || setweight(to_tsvector('english', left(NEW.body, 100000)), 'B');
    END IF;
    RETURN NEW;
END
$fn$;

DROP TRIGGER IF EXISTS mail_search_vector ON mail;
CREATE TRIGGER mail_search_vector
    BEFORE INSERT OR UPDATE OF subject, body, topic_id, search_vector ON mail
    FOR EACH ROW EXECUTE FUNCTION mail_search_vector();

UPDATE schema_metadata SET schema_version = 46 WHERE schema_version < 46;
