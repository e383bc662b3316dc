-- One lineage walk for every replay query (a SQL function), and the event-kind vocabulary
-- enforced by the schema (a CHECK on messages.kind, equal to ikigai_store.VALID_KINDS: a test
-- compares them). Idempotent; runs on adopted C-era databases too.
-- ikigai-adopt: run
-- depends: 0004-messages-agent-uuid

-- The ranges of an agent's virtual history that follow its newest clear, deepest ancestor
-- first by depth. Walk from the leaf: each agent's newest clear <= the current bound (none for
-- the leaf) ends the walk; otherwise the whole own range is taken and the walk moves to the
-- parent, bounded by this agent's fork point. It terminates: each step follows parent_uuid,
-- which only points at rows created earlier (agents form a forest), or stops at a clear.
-- No row: no such agent. start_id is exclusive, end_id inclusive (NULL: no bound, the leaf).
CREATE OR REPLACE FUNCTION agent_replay_ranges(leaf_uuid TEXT)
RETURNS TABLE (depth INTEGER, agent_uuid TEXT, start_id BIGINT, end_id BIGINT)
LANGUAGE sql STABLE
AS $fn$
    WITH RECURSIVE walk (depth, uuid, parent_uuid, fork_message_id, end_id, clear_id) AS (
        SELECT 0, a.uuid, a.parent_uuid, a.fork_message_id, CAST(NULL AS bigint),
               (SELECT max(m.id) FROM messages AS m
                WHERE m.agent_uuid = a.uuid AND m.kind = 'clear')
        FROM agents AS a
        WHERE a.uuid = leaf_uuid
        UNION ALL
        SELECT w.depth + 1, p.uuid, p.parent_uuid, p.fork_message_id, w.fork_message_id,
               (SELECT max(m.id) FROM messages AS m
                WHERE m.agent_uuid = p.uuid AND m.kind = 'clear' AND m.id <= w.fork_message_id)
        FROM walk AS w
        JOIN agents AS p ON p.uuid = w.parent_uuid
        WHERE w.clear_id IS NULL
    )
    SELECT depth, uuid, COALESCE(clear_id, 0), end_id FROM walk
$fn$;

DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_constraint
        WHERE conrelid = 'messages'::regclass AND conname = 'messages_kind_check'
    ) THEN
        ALTER TABLE messages ADD CONSTRAINT messages_kind_check CHECK (kind IN (
            'clear', 'system', 'user', 'assistant', 'tool_call', 'tool_result', 'mark', 'rewind',
            'fork', 'command', 'usage', 'interrupted', 'agent_killed')) NOT VALID;
        BEGIN
            ALTER TABLE messages VALIDATE CONSTRAINT messages_kind_check;
        EXCEPTION WHEN check_violation THEN
            RAISE NOTICE 'messages_kind_check left NOT VALID: old rows have other kinds';
        END;
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 5 WHERE schema_version < 5;
