-- What a queue claim costs stays flat as a topic's history grows, and claims and completions
-- no longer run the notify trigger (measured with scripts/bench_topics.py: 20,000 messages, 8
-- consumers).
-- - Claimed rows by topic and lease end: what claim_queue_item scans for expired leases (dead
--   letters) and claim_refusal for the next expiry. Without it each claim read every open row
--   of its topic, so draining a backlog of N messages cost O(N^2). It holds only claimed rows,
--   so it stays as small as the number of live leases.
-- - Rows that become available again (release, requeue) notify ikigai_queue from a row trigger
--   with a WHEN condition, evaluated without calling any function; 0008's statement trigger
--   ran a PL/pgSQL function over a transition table for every UPDATE of queue_items, claims
--   and completions included (three times per claim). Inserts keep 0008's statement trigger.
-- Idempotent, and run on adopted C-era databases too.
-- ikigai-adopt: run
-- depends: 0009-mail-keeps-recipients

CREATE INDEX IF NOT EXISTS queue_items_lease_idx ON queue_items (topic_id, lease_until)
    WHERE state = 'claimed';

CREATE OR REPLACE FUNCTION queue_notify_row() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    PERFORM pg_notify('ikigai_queue', NEW.topic_id::text);
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS queue_items_notify_update ON queue_items;
CREATE TRIGGER queue_items_notify_update
    AFTER UPDATE OF state ON queue_items
    FOR EACH ROW WHEN (NEW.state = 'available' AND OLD.state <> 'available')
    EXECUTE FUNCTION queue_notify_row();

UPDATE schema_metadata SET schema_version = 10 WHERE schema_version < 10;
