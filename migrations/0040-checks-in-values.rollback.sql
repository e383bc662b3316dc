-- Undo 0040: appends call ikigai_append() again (0032's), activities ikigai_record_activity()
-- and summaries ikigai_add_summary() (0033's); each returns no row when refused.

-- 0030's append, its wake-up through ikigai_notify.
CREATE OR REPLACE FUNCTION ikigai_append(sid BIGINT, agent TEXT, ev_kind TEXT, ev_content TEXT,
                                         ev_data JSONB, target BIGINT)
RETURNS TABLE (id BIGINT, session_id BIGINT, agent_uuid TEXT, kind TEXT, content TEXT,
               data JSONB, created_at TIMESTAMPTZ)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    listened TIMESTAMPTZ;
BEGIN
    SELECT s.listened_until INTO listened
    FROM sessions AS s WHERE s.id = sid AND s.ended_at IS NULL
    FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF agent IS NOT NULL THEN
        PERFORM 1 FROM agents AS a
        WHERE a.uuid = agent AND a.session_id = sid AND a.status = 'running'
        FOR SHARE;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF target IS NOT NULL THEN
        PERFORM 1 FROM messages AS m
        WHERE m.session_id = sid AND m.id = target
          AND CASE WHEN ev_kind = 'rewind' THEN m.kind = 'mark'
                   ELSE m.kind NOT IN ('clear', 'pop') END;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF (listened > ikigai_now()) IS TRUE THEN
        PERFORM ikigai_notify('ikigai_session', CAST(sid AS text));
    END IF;
    RETURN QUERY
        INSERT INTO messages AS e (session_id, agent_uuid, kind, content, data)
        VALUES (sid, agent, ev_kind, ev_content, ev_data)
        RETURNING e.id, e.session_id, e.agent_uuid, e.kind, e.content, e.data, e.created_at;
END
$fn$;



-- activities_record's work (queries/activities.sql): the identity looked up by name (it must
-- exist and not be retired; no row otherwise), then the activity inserted with its id.
CREATE OR REPLACE FUNCTION ikigai_record_activity(who TEXT, act_type TEXT, act_description TEXT,
                                                  act_metadata JSONB)
RETURNS TABLE (id BIGINT, identity TEXT, type TEXT, description TEXT, metadata JSONB,
               created_at TIMESTAMPTZ)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    iid BIGINT;
BEGIN
    SELECT i.id INTO iid FROM identities AS i WHERE i.name = who AND i.retired_at IS NULL;
    IF iid IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        INSERT INTO activities AS a (identity_id, type, description, metadata)
        VALUES (iid, act_type, act_description, act_metadata)
        RETURNING a.id, who, a.type, a.description, a.metadata, a.created_at;
END
$fn$;

-- summaries_add's work (queries/summaries.sql), as ikigai_record_activity's.
CREATE OR REPLACE FUNCTION ikigai_add_summary(who TEXT, s_summary TEXT, s_delta TEXT,
                                              s_transcript_hash TEXT, s_cost_usd DOUBLE PRECISION)
RETURNS TABLE (id BIGINT, identity TEXT, summary TEXT, delta TEXT, transcript_hash TEXT,
               cost_usd DOUBLE PRECISION, created_at TIMESTAMPTZ)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    iid BIGINT;
BEGIN
    SELECT i.id INTO iid FROM identities AS i WHERE i.name = who AND i.retired_at IS NULL;
    IF iid IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        INSERT INTO agent_summaries AS s (identity_id, summary, delta, transcript_hash, cost_usd)
        VALUES (iid, s_summary, s_delta, s_transcript_hash, s_cost_usd)
        RETURNING s.id, who, s.summary, s.delta, s.transcript_hash, s.cost_usd, s.created_at;
END
$fn$;

DROP FUNCTION IF EXISTS ikigai_append_check(BIGINT, TEXT, TEXT, BIGINT);
DROP FUNCTION IF EXISTS ikigai_active_identity(TEXT, TEXT);
UPDATE schema_metadata SET schema_version = 39 WHERE schema_version = 40;
