-- Delayed queue messages and release backoff: queue_items.available_at, the time from which an
-- available message may be claimed (NULL: at once). publish(..., delay=) and publish_many's set
-- it (queue topics only); release(..., delay=) sets it for the retry (a backoff); requeue
-- clears it. The claim's walk of a queue's open rows (queue_items_open_idx, oldest first)
-- passes a message that is not due yet as it passes one held under a live lease: a filter on
-- the row, no index changes (a claim reads every not-due message older than the first
-- claimable one, as pgmq's read passes its invisible messages). A blocking claim sleeps until
-- the next lease expires or the next delayed message is due (claim_refusal), and a release or
-- publish wakes it to look again. A nullable column without a default: a catalog change.
-- depends: 0046-unsearchable-topics

ALTER TABLE queue_items ADD COLUMN IF NOT EXISTS available_at TIMESTAMPTZ;

UPDATE schema_metadata SET schema_version = 47 WHERE schema_version < 47;
