-- Recipient rows that an UPDATE makes unread notify ikigai_mail (payload: the identity id), as
-- 0007's statement trigger did, but from a row trigger whose WHEN clause the executor checks in
-- C: the updates that do not make a row unread (every claim by wait, read, ack, archive, ...)
-- no longer build a transition table nor run PL/pgSQL (issue 22, the wake-up hot path).
-- Invariants: the same notifications as before (channel ikigai_mail, delivered on commit, one
-- per identity per transaction: PostgreSQL folds equal notifications of a transaction into one);
-- rows inserted unread still notify through 0017's statement trigger.
-- depends: 0022-hot-paths

CREATE OR REPLACE FUNCTION mail_notify_unread_row() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM pg_notify('ikigai_mail', NEW.identity_id::text);
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS mail_recipients_notify_update ON mail_recipients;
CREATE TRIGGER mail_recipients_notify_update
    AFTER UPDATE ON mail_recipients
    FOR EACH ROW WHEN (NEW.state = 'unread')
    EXECUTE FUNCTION mail_notify_unread_row();

UPDATE schema_metadata SET schema_version = 23 WHERE schema_version < 23;
