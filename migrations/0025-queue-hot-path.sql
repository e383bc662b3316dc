-- The queue drain hot path (a worker's held = claim(..., complete=held) loop), measured with
-- scripts/bench_topics.py --drain-only.
-- - A claim is a HOT update: it writes no index entry. PostgreSQL updates a row in place (a
--   heap-only tuple on the same page) only when no column an index reads, in its key or in its
--   predicate, changes. 0008/0010's indexes read state (the open, dead and lease indexes'
--   predicates) and lease_until (the lease index's key), which every claim changes: each claim
--   wrote three index entries (primary key, open, lease) besides the row. They now read
--   outcome, generated from state, which is NULL while a message is open (available or
--   claimed) and its final state (done, dead) after: a claim, an extension and a release that
--   makes the message available again keep it NULL. Completion still moves the row out of the
--   open index (one new primary key entry), so a claim's walk never meets done rows.
-- - queue_items_lease_idx goes (lease_until changes with every claim and extension). What read
--   it: the claim's sweep of expired leases that used their last attempt, now done by the
--   claim's own walk of the open index (queries/topics.sql, claim_queue_item: an expired last
--   attempt it meets becomes a dead letter), and claim_refusal's next lease expiry, which reads
--   the topic's open rows (when a claim found nothing to claim, those are the live leases).
-- - No trigger runs on an update of queue_items: 0010's row trigger (a WHEN clause, parsed and
--   set up by every statement that updates the table, claims and completions included) goes;
--   the two statements that make a row available again, release_claim and requeue
--   (queries/topics.sql), call pg_notify themselves, with the same channel and payload (the
--   topic id), delivered on commit as before. Inserts keep 0008's statement trigger.
-- - fillfactor 70: room on each page for the claim's new row version (a full page makes the
--   update move the row to another page, which is not HOT).
-- Invariants: state keeps its meaning (available, claimed, done, dead) and stays the one
-- column written; outcome = state for done and dead rows, NULL otherwise (GENERATED, so it
-- cannot disagree); the open index holds exactly the available and claimed rows, the dead
-- index the dead ones, as before; a row that becomes available again notifies ikigai_queue.
-- Idempotent.
-- depends: 0024-session-listened-until

ALTER TABLE queue_items SET (fillfactor = 70);
-- Adding a stored generated column rewrites the table, at the fillfactor just set.
ALTER TABLE queue_items ADD COLUMN IF NOT EXISTS outcome TEXT
    GENERATED ALWAYS AS (CASE WHEN state IN ('done', 'dead') THEN state END) STORED;

DROP INDEX IF EXISTS queue_items_lease_idx;
DROP INDEX IF EXISTS queue_items_open_idx;
CREATE INDEX queue_items_open_idx ON queue_items (topic_id, mail_id) WHERE outcome IS NULL;
DROP INDEX IF EXISTS queue_items_dead_idx;
CREATE INDEX queue_items_dead_idx ON queue_items (topic_id, mail_id) WHERE outcome = 'dead';

DROP TRIGGER IF EXISTS queue_items_notify_update ON queue_items;
DROP FUNCTION IF EXISTS queue_notify_row();

UPDATE schema_metadata SET schema_version = 25 WHERE schema_version < 25;
