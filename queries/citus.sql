-- name: citus_installed()^
-- True when the citus extension is created in this database (a Citus coordinator).
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS installed;

-- name: citus_available()^
-- True when this server can create the citus extension (citus is in shared_preload_libraries
-- and its files are installed); the extension itself may not be created yet.
SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'citus')
       AND current_setting('shared_preload_libraries') ~ '(^|[ ,])citus($|[ ,])' AS available;

-- name: citus_nodes()
-- The nodes this coordinator database has registered (call only when citus is installed):
-- group 0 is the coordinator itself.
SELECT nodename, nodeport, groupid, isactive, shouldhaveshards
FROM pg_dist_node
WHERE noderole = 'primary'
ORDER BY groupid;

-- name: citus_prepare_lock()^
-- Wait for this server's lock on preparing Citus databases, held by this session until it
-- closes: two citus_add_node calls at once (for two new databases) both update the same role
-- on a worker and one fails with "tuple concurrently updated".
SELECT pg_advisory_lock(hashtextextended('ikigai_store:citus.prepare_database', 0)) IS NULL
       AS locked;

-- name: citus_create_extension()!
-- CREATE EXTENSION citus in this database (a no-op when it exists).
CREATE EXTENSION IF NOT EXISTS citus;

-- name: citus_set_coordinator(host, port)^
-- Register this node as the coordinator of this database (needed before shards can be placed
-- on workers from it).
SELECT citus_set_coordinator_host(:host, :port) IS NULL AS registered;

-- name: citus_add_worker(host, port)^
-- Register a worker node in this database (idempotent: citus_add_node returns the existing id).
SELECT citus_add_node(:host, :port) AS nodeid;

-- name: citus_distribute()
-- Distribute this database's tables as docs/concepts/citus.md says (ikigai_distribute(), which
-- calls each Citus migration's placement function: idempotent; existing rows move to the
-- shards). One row per table it changed, with what it made of it.
SELECT relation, made FROM ikigai_distribute();

-- name: citus_tables()
-- How each application table is placed on the cluster: distributed (with its distribution
-- column and colocation group), reference, or local (on the coordinator); for the first two
-- the nodes holding its shards and its size (of one copy: a reference table's is on every
-- node; citus_shards asks every node), for a local table its size on the coordinator. yoyo's
-- bookkeeping tables are left out.
WITH shards AS (
    SELECT s.table_name, count(DISTINCT (s.nodename, s.nodeport)) AS nodes,
           sum(s.shard_size) AS bytes
    FROM citus_shards AS s
    GROUP BY s.table_name
)
SELECT CAST(c.relname AS text) AS relation,
       COALESCE(CAST(t.citus_table_type AS text), 'local') AS kind,
       CAST(t.distribution_column AS text) AS column_name,
       t.colocation_id, t.shard_count, sh.nodes,
       CAST(CASE WHEN t.table_name IS NULL THEN pg_total_relation_size(c.oid)
                 WHEN CAST(t.citus_table_type AS text) = 'reference'
                 THEN sh.bytes / GREATEST(sh.nodes, 1)
                 ELSE sh.bytes END AS bigint) AS size_bytes
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace AND n.nspname = current_schema()
LEFT JOIN citus_tables AS t ON t.table_name = CAST(c.oid AS regclass)
LEFT JOIN shards AS sh ON sh.table_name = CAST(c.oid AS regclass)
WHERE c.relkind IN ('r', 'p') AND c.relname NOT LIKE '\_yoyo%%'
  AND c.relname NOT LIKE 'yoyo\_%%'
ORDER BY c.relname;

-- name: citus_summary()^
-- The cluster as this database sees it (call only when citus is installed): whether it is
-- the coordinator (as citus_is_coordinator), its active workers, and how many of its application tables are
-- distributed, reference or local (as citus_tables counts them).
SELECT citus_is_coordinator() OR NOT EXISTS (SELECT 1 FROM pg_dist_node) AS coordinator,
       (SELECT count(*) FROM pg_dist_node AS d
        WHERE d.noderole = 'primary' AND d.groupid <> 0 AND d.isactive) AS workers,
       count(*) FILTER (WHERE CAST(t.citus_table_type AS text) = 'distributed') AS distributed,
       count(*) FILTER (WHERE CAST(t.citus_table_type AS text) = 'reference') AS reference,
       count(*) FILTER (WHERE t.table_name IS NULL OR CAST(t.citus_table_type AS text)
                               NOT IN ('distributed', 'reference')) AS local
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace AND n.nspname = current_schema()
LEFT JOIN citus_tables AS t ON t.table_name = CAST(c.oid AS regclass)
WHERE c.relkind IN ('r', 'p') AND c.relname NOT LIKE '\_yoyo%%'
  AND c.relname NOT LIKE 'yoyo\_%%';

-- name: citus_async_commit_nodes()
-- The primary nodes that hold or may get shards on which a new session of this user in this database commits with
-- synchronous_commit = off (acknowledged before its commit record is written), and those that
-- could not be asked (success false, result the error). A shard moved by logical replication
-- from such a node can leave acknowledged writes behind: Citus waits for the source's
-- pg_current_wal_lsn(), the WAL write position (docs/concepts/citus.md, "Growing the cluster").
SELECT n.nodename, n.nodeport, r.success, r.result
FROM run_command_on_all_nodes('SHOW synchronous_commit') AS r
JOIN pg_dist_node AS n ON n.nodeid = r.nodeid
WHERE n.noderole = 'primary'
  AND (n.shouldhaveshards OR EXISTS (SELECT 1 FROM pg_dist_placement AS p
                                     WHERE p.groupid = n.groupid))
  AND (NOT r.success OR r.result = 'off')
ORDER BY n.groupid, n.nodeport;

-- name: citus_rebalance_start(mode, drain_only)^
-- Start Citus' background rebalancer with this shard transfer mode ('auto', 'force_logical'
-- or 'block_writes'); with drain_only, it only moves the shards of nodes marked
-- shouldhaveshards = false off them. job_id is NULL when no shard needs to move.
SELECT citus_rebalance_start(drain_only => :drain_only,
                             shard_transfer_mode => CAST(:mode AS citus.shard_transfer_mode))
       AS job_id;

-- name: citus_node_keeps_no_shards(host, port)^
-- Mark a node of this database to hold no shards (what a drain moves them off; no later
-- rebalance puts any back until the property is set true again).
SELECT citus_set_node_property(:host, :port, 'shouldhaveshards', false) IS NULL AS marked;

-- name: citus_remove_worker(host, port)^
-- Remove a drained node from this database's nodes (Citus refuses while it holds shards).
SELECT citus_remove_node(:host, :port) IS NULL AS removed;


-- name: citus_job_progress(job_id)^
-- A background job's state (Citus' pg_dist_background_job: scheduled, running, finished,
-- cancelling, cancelled, failing, failed) and its tasks' (a rebalance's shard moves): how many,
-- how many done and running, and what the tasks that failed or are waiting to be retried
-- said. No row: no such job.
SELECT CAST(j.state AS text) AS state,
       count(t.task_id) AS tasks,
       count(t.task_id) FILTER (WHERE t.status = 'done') AS done,
       count(t.task_id) FILTER (WHERE t.status IN ('running', 'cancelling')) AS running,
       COALESCE(array_agg(DISTINCT t.message) FILTER (WHERE t.message <> ''
                                                     AND t.status <> 'done'),
                ARRAY[]::text[]) AS messages
FROM pg_dist_background_job AS j
LEFT JOIN pg_dist_background_task AS t ON t.job_id = j.job_id
WHERE j.job_id = :job_id
GROUP BY j.state;

-- name: citus_job_cancel(job_id)^
-- Cancel a background job (its running task is stopped, the others never start); a finished
-- job is left as it is.
SELECT citus_job_cancel(:job_id) IS NULL AS cancelled;

-- name: citus_worker_slots()^
-- This node's background worker slots (max_worker_processes) and how many are held for good:
-- by Citus' maintenance daemons (one per database that has used citus since the server
-- started, until it is dropped) and other workers that stay. Workers that end by themselves
-- are not counted: parallel query workers, Citus' task queue monitors and executors (a
-- running job's), logical replication apply and table sync workers (a running move's). A
-- rebalance job needs two slots (Citus' task queue monitor and an executor for its moves).
SELECT CAST(current_setting('max_worker_processes') AS integer) AS slots,
       count(*) FILTER (WHERE a.backend_type NOT IN (
                               'client backend', 'autovacuum launcher', 'autovacuum worker',
                               'background writer', 'checkpointer', 'walwriter', 'walsender',
                               'walreceiver', 'startup', 'archiver', 'logger', 'io worker',
                               'slotsync worker', 'standalone backend', 'walsummarizer',
                               'parallel worker', 'logical replication worker',
                               'logical replication apply worker',
                               'logical replication tablesync worker',
                               'logical replication parallel worker')
                          AND a.backend_type NOT LIKE 'Citus Background Task Queue%%')
           AS held,
       count(*) FILTER (WHERE a.backend_type LIKE 'Citus Maintenance Daemon%%') AS daemons
FROM pg_stat_activity AS a;

-- name: citus_is_coordinator()^
-- Whether this node is its cluster's coordinator (call only when citus is installed): a
-- worker answers false (its tables are the coordinator's shards and metadata). A database
-- that has registered no node yet is a single-node cluster's coordinator (Citus puts its
-- shards there), although citus_is_coordinator() answers false until a node is added.
SELECT citus_is_coordinator() OR NOT EXISTS (SELECT 1 FROM pg_dist_node) AS coordinator;

-- name: citus_cleanup_orphans()!
-- Drop now what Citus keeps for a deferred cleanup: the source copies of shards moved
-- (pg_dist_cleanup), where no lock stops it.
CALL citus_cleanup_orphaned_resources();

-- name: citus_pending_cleanup(group_id)^
-- How many objects Citus still has to drop on the nodes of this group (pg_dist_cleanup): a
-- node removed before they are gone leaves records no cleanup can finish, and the shards they
-- name can never move again.
SELECT count(*) AS n FROM pg_dist_cleanup WHERE node_group_id = :group_id;
