-- Undo 0050: every new available queue row notifies ikigai_queue again (0032's trigger).
CREATE OR REPLACE FUNCTION queue_notify_available() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM ikigai_notify_ids('ikigai_queue',
                              (SELECT string_agg(DISTINCT topic_id::text, ',')
                               FROM changed WHERE state = 'available'));
    RETURN NULL;
END
$fn$;

DROP FUNCTION IF EXISTS ikigai_queue_listen(BIGINT, DOUBLE PRECISION, DOUBLE PRECISION);
ALTER TABLE topics DROP COLUMN IF EXISTS listened_until;

UPDATE schema_metadata SET schema_version = 49 WHERE schema_version = 50;
