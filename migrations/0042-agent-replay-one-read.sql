-- On Citus, an agent's replay reads the events of its whole lineage in one statement (issue
-- 36). agent_replay_events (migration 0030) reads each range of the agent's lineage
-- (agent_replay_ranges: its own events and each ancestor's up to the fork) with a statement of
-- its own, one after another: on Citus a round trip to the session's shard a range, so every
-- level of forking adds one.
-- Now, on Citus (ikigai_is_distributed, migration 0040) and with more than one range, the ranges
-- (collected on the coordinator, root first) are joined laterally with the session's events in
-- one statement, which Citus routes to the session's shard as one command (a router query may
-- join a function's rows with one shard's rows): two commands (the lineage walk's read of the
-- clears, then this one) at any depth. An agent three forks deep on the test cluster: 1.71-1.81
-- ms against 2.06-2.39 before, in the same runs (scripts/bench_citus.py). Elsewhere, and
-- for a single range (a root agent), each range is read as before: on plain PostgreSQL the
-- join cost more than the reads it replaced (it sorts what the index gives in order), and a
-- single range's read is one that Citus plans on its fast path. The result is the same either
-- way: each range's events in id order, root range first, one row of NULLs for an empty range,
-- no row for a missing agent.
-- depends: 0041-routed-batches

-- Everything lineage replay needs, for one agent, in one call (queries/agents.sql
-- replay_agent_events): each range of agent_replay_ranges() with its events, root range first,
-- id order within; an empty range yields one row of NULLs, so "no rows" means "no such agent".
-- Every read names the agent's session: on Citus each goes to that session's one shard, and
-- the ranges of a fork are one read.
CREATE OR REPLACE FUNCTION agent_replay_events(leaf_uuid TEXT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
    range_agents TEXT[];
    range_starts BIGINT[];
    range_ends BIGINT[];
BEGIN
    SELECT a.session_id INTO sid FROM agents AS a WHERE a.uuid = leaf_uuid;
    IF sid IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg(w.agent_uuid ORDER BY w.depth DESC),
           array_agg(w.start_id ORDER BY w.depth DESC),
           array_agg(w.end_id ORDER BY w.depth DESC)
    INTO range_agents, range_starts, range_ends
    FROM agent_replay_ranges(leaf_uuid) AS w;
    IF cardinality(range_agents) > 1 AND ikigai_is_distributed('messages') THEN
        RETURN QUERY
            SELECT e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at
            FROM unnest(range_agents, range_starts, range_ends) WITH ORDINALITY
                 AS r (uuid, start_id, end_id, n)
            LEFT JOIN LATERAL (
                SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, m.data,
                       m.created_at
                FROM messages AS m
                WHERE m.session_id = sid
                  AND (m.agent_uuid, m.id) > (r.uuid, r.start_id)
                  AND (m.agent_uuid, m.id)
                      <= (r.uuid, COALESCE(r.end_id, 9223372036854775807))
            ) AS e ON true
            ORDER BY r.n, e.agent_uuid, e.id;
        RETURN;
    END IF;
    FOR i IN 1 .. COALESCE(cardinality(range_agents), 0) LOOP
        RETURN QUERY
            SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, m.data, m.created_at
            FROM messages AS m
            WHERE m.session_id = sid
              AND (m.agent_uuid, m.id) > (range_agents[i], range_starts[i])
              AND (m.agent_uuid, m.id)
                  <= (range_agents[i], COALESCE(range_ends[i], 9223372036854775807))
            ORDER BY m.agent_uuid, m.id;
        IF NOT FOUND THEN
            RETURN NEXT;  -- the empty range's row of NULLs
        END IF;
    END LOOP;
END
$fn$;

UPDATE schema_metadata SET schema_version = 42 WHERE schema_version < 42;
