-- Citus (issue 36): distributing a table that holds rows leaves no copy of them behind.
-- create_distributed_table copies a table's rows to its shards and keeps the originals in the
-- coordinator's own table, where no query reads them again (every statement goes to the
-- shards) but they take their space for good: 200,000 events kept 76 MB on the coordinator
-- that only truncate_local_data_after_distributing_table gives back (Citus says so in a
-- NOTICE that ikigai_distribute() never showed). This migration adds the last area function of
-- ikigai_distribute() (0033), ikigai_distribute_0043_local_copies(): called after every
-- placement before it (the areas run in name order), it empties the coordinator's copy of
-- each hash-distributed table of this schema that still holds one, and returns a row for
-- each. So `ikigai-store citus distribute` removes the copies it makes, and migrating a
-- database distributed before this migration removes the copies left there. On plain
-- PostgreSQL (and the embedded server) nothing changes: the function is only defined.
-- A migration that places a table after this one (its area function sorts after this one)
-- empties its own tables' copies (docs/concepts/citus.md, "Adding a table to the placement").
-- depends: 0042-agent-replay-one-read

CREATE OR REPLACE FUNCTION ikigai_distribute_0043_local_copies()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    t RECORD;
BEGIN
    -- A table's own storage on the coordinator is empty once distributed, unless it held
    -- rows then (create_distributed_table copied them and kept them). Truncating it there
    -- (Citus' function: the shards are not touched) takes an ACCESS EXCLUSIVE lock to commit,
    -- as the distribution did. The sizes are read before any truncate (a truncate cascades
    -- to the tables whose foreign keys reference it: colocated distributed ones).
    FOR t IN SELECT p.logicalrelid AS rel, CAST(c.relname AS text) AS name,
                    pg_size_pretty(pg_total_relation_size(p.logicalrelid)) AS size
             FROM pg_dist_partition AS p
             JOIN pg_class AS c ON c.oid = p.logicalrelid
             WHERE p.partmethod = 'h'
               AND c.relnamespace = CAST(current_schema() AS regnamespace)
               AND pg_relation_size(p.logicalrelid) > 0
             ORDER BY c.relname
    LOOP
        PERFORM truncate_local_data_after_distributing_table(t.rel);
        relation := t.name;
        made := 'the copy of its rows left on the coordinator removed (' || t.size || ')';
        RETURN NEXT;
    END LOOP;
END
$fn$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM ikigai_distribute();
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 43 WHERE schema_version < 43;
