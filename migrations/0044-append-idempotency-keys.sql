-- Appends with an idempotency key: a retried append (after ConnectionLost, a crash between the
-- commit and the reply, a runtime replaying its own outbox) stores its event once. An event
-- may carry a key, unique within its session (messages_idempotency_key_idx, partial: events
-- without a key, the common case, add no index entry); ikigai_append_keyed() stores the event
-- unless its session already holds one with that key, and then returns that one instead, with
-- whether it is the same event (same kind, agent, content and data: the caller refuses a key
-- reused for another event). On Citus the key's index includes the distribution column
-- (session_id), as Citus requires of a unique index, and every statement of the function names
-- the session: each goes to the session's shard.
-- depends: 0043-citus-no-local-copies

-- On Citus this transaction changes a distributed table (its column and index go to every
-- shard) and then creates a function, which Citus refuses after a parallel shard command: its
-- shard commands run one at a time (as 0036's rollback).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
END
$$;

ALTER TABLE messages ADD COLUMN IF NOT EXISTS idempotency_key TEXT;

CREATE UNIQUE INDEX IF NOT EXISTS messages_idempotency_key_idx
    ON messages (session_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Append one event with key (1-200 characters, checked by the caller) to session sid, as
-- queries/messages.sql's append_message does (ikigai_append_id: the same checks, locks, id and
-- wake-up), unless the session already has an event with that key. One row: the event stored
-- now (inserted true) or the one stored before with this key (inserted false), with same:
-- whether that one is this event (kind, agent, content and data equal). The earlier event is
-- looked up first, so a retry after the session ended, or after the agent was killed, still
-- finds it rather than being refused; a racing append of the same key waits in the insert's
-- ON CONFLICT for the other to commit, then reads its row.
CREATE OR REPLACE FUNCTION ikigai_append_keyed(sid BIGINT, agent TEXT, ev_kind TEXT,
                                               ev_content TEXT, ev_data JSONB, target BIGINT,
                                               key TEXT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ, inserted BOOLEAN, same BOOLEAN)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    found_row RECORD;
BEGIN
    FOR pass IN 1..2 LOOP
        -- Planned afresh at each call (EXECUTE): a plan cached while the session was small
        -- (PL/pgSQL keeps a generic one after five calls) walked its events by
        -- idx_messages_session, a cost growing with the session (1.2 ms at 20,000 events).
        EXECUTE 'SELECT m.id, m.session_id, m.agent_uuid, m.kind, m.content, m.data, '
                'm.created_at FROM messages AS m '
                'WHERE m.session_id = $1 AND m.idempotency_key = $2'
        INTO found_row USING sid, key;
        IF found_row.id IS NOT NULL THEN
            RETURN QUERY SELECT found_row.id, found_row.session_id, found_row.agent_uuid,
                                found_row.kind, found_row.content, found_row.data,
                                found_row.created_at, false,
                                (found_row.kind, found_row.agent_uuid, found_row.content,
                                 found_row.data)
                                IS NOT DISTINCT FROM (ev_kind, agent, ev_content, ev_data);
            RETURN;
        END IF;
        EXIT WHEN pass = 2;
        RETURN QUERY
        INSERT INTO messages AS e (id, session_id, agent_uuid, kind, content, data,
                                   idempotency_key)
        VALUES (ikigai_append_id(sid, agent, ev_kind, target), sid, agent, ev_kind,
                ev_content, ev_data, key)
        ON CONFLICT (session_id, idempotency_key) WHERE idempotency_key IS NOT NULL
        DO NOTHING
        RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at,
                  true, true;
        IF FOUND THEN
            RETURN;
        END IF;
        -- A racing append stored this key first (and committed): read it.
    END LOOP;
    RAISE EXCEPTION 'append with idempotency key % of session %: the event holding it '
                    'could not be read', key, sid;
END
$fn$;

UPDATE schema_metadata SET schema_version = 44 WHERE schema_version < 44;
