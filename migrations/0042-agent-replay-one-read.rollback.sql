-- Undo 0042: 0030's agent_replay_events (a statement a range).

-- Everything lineage replay needs, for one agent, in one call (queries/agents.sql
-- replay_agent_events): each range of agent_replay_ranges() with its events, root range first,
-- id order within; an empty range yields one row of NULLs, so "no rows" means "no such agent".
-- Each range's read names the agent's session: on Citus every read goes to that session's one
-- shard.
CREATE OR REPLACE FUNCTION agent_replay_events(leaf_uuid TEXT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    sid BIGINT;
    r RECORD;
    found_any BOOLEAN;
BEGIN
    SELECT a.session_id INTO sid FROM agents AS a WHERE a.uuid = leaf_uuid;
    IF sid IS NULL THEN
        RETURN;
    END IF;
    FOR r IN SELECT w.agent_uuid, w.start_id, w.end_id
             FROM agent_replay_ranges(leaf_uuid) AS w ORDER BY w.depth DESC LOOP
        found_any := false;
        FOR id, session_id, agent_uuid, kind, content, data, created_at IN
            SELECT e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at
            FROM messages AS e
            WHERE e.session_id = sid
              AND (e.agent_uuid, e.id) > (r.agent_uuid, r.start_id)
              AND (e.agent_uuid, e.id) <= (r.agent_uuid,
                                           COALESCE(r.end_id, 9223372036854775807))
            ORDER BY e.agent_uuid, e.id
        LOOP
            found_any := true;
            RETURN NEXT;
        END LOOP;
        IF NOT found_any THEN
            id := NULL; session_id := NULL; agent_uuid := NULL; kind := NULL;
            content := NULL; data := NULL; created_at := NULL;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$fn$;

UPDATE schema_metadata SET schema_version = 41 WHERE schema_version = 42;
