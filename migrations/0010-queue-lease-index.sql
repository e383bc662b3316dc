-- Claimed queue rows by topic and lease end: what claim_queue_item scans for expired leases
-- (dead letters) and claim_refusal for the next expiry. Without it each claim read every open
-- row of its topic, so draining a backlog of N messages cost O(N^2) (measured with
-- scripts/bench_topics.py: 20,000 messages, 8 consumers). The index holds only claimed rows,
-- so it stays as small as the number of live leases.
-- Idempotent, and run on adopted C-era databases too.
-- ikigai-adopt: run
-- depends: 0009-mail-keeps-recipients

CREATE INDEX IF NOT EXISTS queue_items_lease_idx ON queue_items (topic_id, lease_until)
    WHERE state = 'claimed';

UPDATE schema_metadata SET schema_version = 10 WHERE schema_version < 10;
