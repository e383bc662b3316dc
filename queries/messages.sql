-- name: append_message(session_id, agent_uuid, kind, content, data, target_message_id)^
-- Append one event and return the stored row. One INSERT ... VALUES whose id is
-- ikigai_append_id() (migration 0040, where the steps are): it checks and locks, then draws
-- the id (so an id is never drawn before the session's lock is held: session_wait_appends),
-- and no check can race the insert. It raises, and nothing is inserted, when the write is
-- refused: SQLSTATE IK404 when the session
-- or the agent does not exist, IK400 when the session has ended, agent_uuid is not a running
-- agent of that session, or (when target_message_id is given) the target is not an event of the
-- same session that the kind can aim at: a mark for a rewind, anything but a clear or a pop for
-- a pop. The rows checked are locked until commit: the agent's FOR SHARE, which kill_agent's
-- UPDATE waits for; the session's FOR KEY SHARE, which end_session's FOR UPDATE waits for
-- (queries/sessions.sql) but a listener registration's UPDATE of listened_until does not. So a
-- concurrent end_session or kill_agent either waits for this append or is seen by it (READ
-- COMMITTED re-checks a locked row's newest version): no event lands in an ended session or on
-- a dead agent. data is JSON text, validated and serialised once by the caller. Rows are never
-- updated: id is the order. Wakes the servers showing the session (migration 0024) when its
-- listened_until is in the future (read with the session's lock, so an append reads no other
-- table for it). On Citus the coordinator evaluates the check, then sends the row to the
-- session's shard as one command. Store.append runs this statement for rewinds and pops;
-- others go through append_event or append_agent_event, the same check with the arguments
-- that cannot apply left NULL.
INSERT INTO messages AS e (id, session_id, agent_uuid, kind, content, data)
VALUES (ikigai_append_id(CAST(:session_id AS bigint), CAST(:agent_uuid AS text),
                         CAST(:kind AS text), CAST(:target_message_id AS bigint)),
        CAST(:session_id AS bigint), CAST(:agent_uuid AS text), CAST(:kind AS text),
        CAST(:content AS text), CAST(:data AS jsonb))
RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at;

-- name: append_event(session_id, kind, content, data)^
-- append_message for an event of no agent that is not a rewind (the common case): the same
-- insert, session check, lock and wake-up, without the two checks that are no-ops then (their
-- arguments are NULL: the function's statements are planned once per connection either way).
-- Returns the stored row; a refused write raises (IK404, IK400) and inserts nothing.
INSERT INTO messages AS e (id, session_id, agent_uuid, kind, content, data)
VALUES (ikigai_append_id(CAST(:session_id AS bigint), NULL, CAST(:kind AS text), NULL),
        CAST(:session_id AS bigint), NULL, CAST(:kind AS text), CAST(:content AS text), CAST(:data AS jsonb))
RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at;

-- name: append_agent_event(session_id, agent_uuid, kind, content, data)^
-- append_message for an event of an agent that is not a rewind (see append_event): the
-- session's row is locked FOR KEY SHARE and the agent's FOR SHARE; nothing is inserted unless
-- the session exists and has not ended and agent_uuid is a running agent of it (else it
-- raises: IK404, IK400).
INSERT INTO messages AS e (id, session_id, agent_uuid, kind, content, data)
VALUES (ikigai_append_id(CAST(:session_id AS bigint), CAST(:agent_uuid AS text),
                         CAST(:kind AS text), NULL),
        CAST(:session_id AS bigint), CAST(:agent_uuid AS text), CAST(:kind AS text),
        CAST(:content AS text), CAST(:data AS jsonb))
RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at;

-- name: append_keyed(session_id, agent_uuid, kind, content, data, target_message_id, idempotency_key)^
-- append_message with an idempotency key (Store.append's idempotency_key; migration 0044's
-- ikigai_append_keyed): the event is stored unless the session already holds one with this
-- key, and then that one is returned instead (inserted false), with whether it is the same
-- event (same: kind, agent, content and data equal). The checks, locks, refusals (IK404,
-- IK400) and wake-up are append_message's, for an event stored now; an earlier event of the
-- key is returned even after the session ended. On Citus each statement goes to the
-- session's shard.
SELECT id, session_id, agent_uuid, kind, content, data, created_at, inserted, same
FROM ikigai_append_keyed(CAST(:session_id AS bigint), CAST(:agent_uuid AS text),
                         CAST(:kind AS text), CAST(:content AS text), CAST(:data AS jsonb),
                         CAST(:target_message_id AS bigint), CAST(:idempotency_key AS text));

-- name: append_events(session_id, kinds, contents, datas)
-- append_event for many events in one call (Store.append_many, an OpenAI Agents SDK session's
-- add_items), all or none: the i-th event is (kinds[i], contents[i], datas[i]) and takes the
-- i-th id. ikigai_append_batch() (migration 0040) checks the session once, locking it FOR
-- UPDATE (not FOR KEY SHARE like a single append) before any id is drawn, so the batch's ids
-- are consecutive: it waits for the appends in flight, later ones wait for it. (A transaction
-- that appended to the session before and then batches while another does the same can
-- deadlock: PostgreSQL then fails one of them.) Wakes the servers showing the session as
-- append_message does. A refusal raises (IK404, IK400) and stores nothing. On Citus the rows
-- reach the session's shard as one command.
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM ikigai_append_batch(CAST(:session_id AS bigint), NULL, CAST(:kinds AS text[]),
                         CAST(:contents AS text[]), CAST(:datas AS text[]))
ORDER BY id;

-- name: append_agent_events(session_id, agent_uuid, kinds, contents, datas)
-- append_events for events of one agent (append_agent_event's checks): nothing is stored unless
-- the session exists and has not ended and agent_uuid is a running agent of it (checked once
-- for every event; the agent's row locked FOR SHARE, the session's FOR UPDATE as in
-- append_events: consecutive ids); else it raises (IK404, IK400).
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM ikigai_append_batch(CAST(:session_id AS bigint), CAST(:agent_uuid AS text),
                         CAST(:kinds AS text[]), CAST(:contents AS text[]),
                         CAST(:datas AS text[]))
ORDER BY id;

-- name: append_events_keyed(session_id, agent_uuid, kinds, contents, datas, idempotency_key)
-- append_events / append_agent_events (agent_uuid NULL or not) with an idempotency key
-- (Store.append_many's idempotency_key; migration 0045's ikigai_append_batch_keyed): the
-- batch is stored, its first event carrying the key, unless the session already holds an
-- event with this key; then the session's events from that one, as many as the batch has,
-- are returned instead (inserted false), with whether they are this batch (same). The checks,
-- lock, refusals and wake-up are append_events'. On Citus each statement goes to the
-- session's shard.
SELECT id, session_id, agent_uuid, kind, content, data, created_at, inserted, same
FROM ikigai_append_batch_keyed(CAST(:session_id AS bigint), CAST(:agent_uuid AS text),
                               CAST(:kinds AS text[]), CAST(:contents AS text[]),
                               CAST(:datas AS text[]), CAST(:idempotency_key AS text))
ORDER BY id;

-- name: session_messages(session_id)
-- The full audit trail of a session, in id order.
SELECT id, session_id, agent_uuid, kind, content, data, created_at
FROM messages
WHERE session_id = :session_id
ORDER BY id;

-- name: count_session_messages(session_id)^
-- How many events a session has.
SELECT count(*) AS count FROM messages WHERE session_id = :session_id;

-- name: session_exists(session_id)^
-- Whether the session exists, and whether it has ended (rare paths: why a write was refused).
SELECT EXISTS (SELECT 1 FROM sessions WHERE id = :session_id) AS exists,
       EXISTS (SELECT 1 FROM sessions WHERE id = :session_id AND ended_at IS NOT NULL) AS ended;
