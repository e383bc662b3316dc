-- Batches with an idempotency key: a retried append_many (after ConnectionLost, a crash
-- between the commit and the reply) stores its events once. The key is stored on the batch's
-- first event (0044's column and unique index: one key space per session, shared with single
-- appends); the batch's events are consecutive within the session (ikigai_append_batch locks
-- the session FOR UPDATE before any id is drawn), so a retry finds them as the session's first
-- n events from the keyed one.
-- depends: 0044-append-idempotency-keys

-- Append events (kinds[i], contents[i], datas[i]) to session sid as ikigai_append_batch does
-- (migration 0040: the same checks, lock, wake-up and Citus path), the first one carrying key,
-- unless the session already holds an event with that key. Every row returned carries
-- inserted (stored now) and same: whether the events found are this batch (as many, and each
-- of the same kind, agent, content and data, in order). The key is looked up before the
-- session is locked (a retry after the session ended still finds its events rather than
-- being refused) and again once it is locked: a racing batch or keyed append holding the
-- session's lock has committed by then, and its event is found, so the insert needs no
-- ON CONFLICT (which would store the batch's other events).
CREATE OR REPLACE FUNCTION ikigai_append_batch_keyed(sid BIGINT, agent TEXT, kinds TEXT[],
                                                     contents TEXT[], datas TEXT[], key TEXT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ, inserted BOOLEAN, same BOOLEAN)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    n INTEGER := cardinality(kinds);
    first_id BIGINT;
    listened TIMESTAMPTZ;
    rows_sql TEXT;
    matches BOOLEAN;
    f_ids BIGINT[];
    f_agents TEXT[];
    f_kinds TEXT[];
    f_contents TEXT[];
    f_datas JSONB[];
    f_times TIMESTAMPTZ[];
BEGIN
    FOR pass IN 1..2 LOOP
        -- Planned at each call (EXECUTE), as 0044's lookup: a cached generic plan walked the
        -- session's events.
        EXECUTE 'SELECT m.id FROM messages AS m '
                'WHERE m.session_id = $1 AND m.idempotency_key = $2'
        INTO first_id USING sid, key;
        IF first_id IS NOT NULL THEN
            -- The session's first n events from it, in one read routed to its shard, then
            -- compared here with the batch.
            EXECUTE 'SELECT array_agg(m.id ORDER BY m.id), '
                    'array_agg(m.agent_uuid ORDER BY m.id), array_agg(m.kind ORDER BY m.id), '
                    'array_agg(m.content ORDER BY m.id), '
                    'array_agg(m.data ORDER BY m.id), array_agg(m.created_at ORDER BY m.id) '
                    'FROM (SELECT x.id, x.agent_uuid, x.kind, x.content, x.data, x.created_at '
                    'FROM messages AS x WHERE x.session_id = $1 AND x.id >= $2 '
                    'ORDER BY x.id LIMIT $3) AS m'
            INTO f_ids, f_agents, f_kinds, f_contents, f_datas, f_times
            USING sid, first_id, n;
            matches := cardinality(f_ids) = n AND f_kinds = kinds
                       AND f_agents = array_fill(agent, ARRAY[n])
                       AND f_contents = contents AND f_datas = CAST(datas AS jsonb[]);
            RETURN QUERY
                SELECT f.i, sid, f.a, f.k, f.c, f.d, f.t, false, COALESCE(matches, false)
                FROM unnest(f_ids, f_agents, f_kinds, f_contents, f_datas, f_times)
                     AS f (i, a, k, c, d, t);
            RETURN;
        END IF;
        IF pass = 1 THEN
            listened := ikigai_append_lock(sid, agent, true);
        END IF;
    END LOOP;
    IF (listened > ikigai_now()) IS TRUE THEN
        PERFORM ikigai_notify('ikigai_session', CAST(sid AS text));
    END IF;
    IF ikigai_is_distributed('messages') THEN
        SELECT string_agg(format('(%s, %L, %L, %L, CAST(%L AS jsonb), %L)', sid, agent, e.k,
                                 e.c, e.d, CASE WHEN e.n = 1 THEN key END),
                          ', ' ORDER BY e.n)
        INTO rows_sql
        FROM unnest(kinds, contents, datas) WITH ORDINALITY AS e (k, c, d, n);
        IF rows_sql IS NULL THEN  -- no events
            RETURN;
        END IF;
        RETURN QUERY EXECUTE
            'INSERT INTO messages AS e (session_id, agent_uuid, kind, content, data, '
            'idempotency_key) VALUES ' || rows_sql
            || ' RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, '
               'e.created_at, true, true';
    ELSE
        RETURN QUERY
            INSERT INTO messages AS e (session_id, agent_uuid, kind, content, data,
                                       idempotency_key)
            SELECT sid, agent, u.k, u.c, CAST(u.d AS jsonb), CASE WHEN u.n = 1 THEN key END
            FROM unnest(kinds, contents, datas) WITH ORDINALITY AS u (k, c, d, n)
            ORDER BY u.n
            RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data,
                      e.created_at, true, true;
    END IF;
END
$fn$;

UPDATE schema_metadata SET schema_version = 45 WHERE schema_version < 45;
