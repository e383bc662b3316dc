-- Citus (issue 36): a review's iterations and issues distributed by a key of their own.
-- ikigai_distribute() (0033) now also places review_iterations and review_issues (0012) on the
-- cluster, through this migration's area function ikigai_distribute_0038_reviews() (called
-- after 0036's); on plain PostgreSQL (and the embedded server) nothing is distributed,
-- as in 0030. A database migrated before citus was created in it is distributed later with
-- `ikigai-store citus distribute`: the rows of every table it distributes move to the shards.
--
-- The placement added here (the reasons are in docs/concepts/citus.md):
-- - review_iterations and review_issues are hash-distributed by review_id (the review's uuid),
--   colocated with each other (a colocation group of their own: review ids are unrelated to
--   the other keys): a review's iterations and issues live on one shard, so every statement
--   that serves one review (recording an iteration with its issues, its iterations, its
--   issues, its open issues) is routed to that shard; what names an issue by its id alone
--   (review_resolve_issue, review_issue) finds it on every shard first, then writes and
--   reads it on its review's shard.
--   - reviews stays on the coordinator, as task_lists does for tasks: its thread_id (the
--     8-digit prefix) and id are unique without review_id, review_by_prefix is a uuid range,
--     and its row lock (review_fire's FOR UPDATE, review_record_iteration's UPDATE) keeps
--     serialising a review's state changes and numbering its iterations, PostgreSQL's own.
--     review_fire, review_get, the listings and review_active read and write reviews (and
--     mail, identities) only: they are unchanged and ask no shard but the sender's activity
--     shard (post_mail).
--   - Keys gain the distribution column: both primary keys become (review_id, id); id stays
--     unique (the coordinator's sequence). review_iterations_num_key (review_id,
--     iteration_num) already had it, and so do review_issues' two composite foreign keys to
--     review_iterations: Citus accepts them between the colocated tables, and they stay, so
--     an issue is still of an iteration of its review, and resolved in one.
--   - review_iterations' foreign keys to reviews and identities (coordinator tables) go, as
--     tasks' to task_lists did. What they guaranteed still holds, in the statement: an
--     iteration is inserted only by ikigai_review_record_iteration, after its UPDATE of the
--     review's row (under that row's lock) and its read of the reviewer FOR SHARE (what the
--     key's check took), with their values; no statement deletes a review or an identity.
--   - Neither table has a trigger, and no review statement notifies: the mail a state change
--     writes wakes its recipients through post_mail of 0016 (0032: after the commit), on the coordinator.
-- The functions are the statements of queries/reviews.sql that touch these tables and
-- something else (reviews, identities, mail): each reads or writes one review's rows of the
-- distributed tables with its review_id as a value (on Citus, routed to the review's shard),
-- and the coordinator's tables apart. A row of a distributed table travels to the
-- coordinator as jsonb (to_jsonb on the shard, jsonb_populate_record here), so that no
-- statement joins a distributed table with a coordinator one. Same results on plain
-- PostgreSQL. The area function is idempotent and returns one row per table it changed, as
-- ikigai_distribute() does.
-- depends: 0037-langgraph-chain-reads

-- A review's iterations (num NULL) or its iteration num, each with its issues, one row per
-- issue (issue columns NULL for an iteration without issues), in order: one routed statement
-- on the review's shard (its iterations joined with their issues), then the reviewers' names
-- on the coordinator. No iteration: no rows.
CREATE OR REPLACE FUNCTION ikigai_review_rows(rid UUID, num INTEGER)
RETURNS TABLE (id BIGINT, review_id UUID, iteration_num INTEGER, reviewer TEXT,
               reviewer_session_id TEXT, decision TEXT, summary TEXT, suggestions JSONB,
               files_reviewed INTEGER, lines_analyzed BIGINT, duration_ms BIGINT,
               cost_usd DOUBLE PRECISION, created_at TIMESTAMPTZ, issue_id BIGINT,
               issue_type TEXT, severity TEXT, file_path TEXT, line_start INTEGER,
               line_end INTEGER, title TEXT, description TEXT, code_snippet TEXT,
               suggestion TEXT, claude_md_ref TEXT, status TEXT, resolved_at TIMESTAMPTZ,
               resolved_in_iteration INTEGER)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    found_rows JSONB;
BEGIN
    SELECT jsonb_agg(jsonb_build_object('it', to_jsonb(it), 'iss', to_jsonb(iss))
                     ORDER BY it.iteration_num, iss.id)
    INTO found_rows
    FROM review_iterations AS it
    LEFT JOIN review_issues AS iss
           ON iss.review_id = it.review_id AND iss.iteration_num = it.iteration_num
    WHERE it.review_id = rid AND (num IS NULL OR it.iteration_num = num);
    IF found_rows IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT it.id, it.review_id, it.iteration_num, i.name, it.reviewer_session_id,
               it.decision, it.summary, it.suggestions, it.files_reviewed, it.lines_analyzed,
               it.duration_ms, it.cost_usd, it.created_at,
               iss.id, iss.issue_type, iss.severity, iss.file_path, iss.line_start,
               iss.line_end, iss.title, iss.description, iss.code_snippet, iss.suggestion,
               iss.claude_md_ref, iss.status, iss.resolved_at, iss.resolved_in_iteration
        FROM jsonb_array_elements(found_rows) WITH ORDINALITY AS e(doc, n)
        CROSS JOIN LATERAL jsonb_populate_record(NULL::review_iterations, e.doc -> 'it') AS it
        CROSS JOIN LATERAL jsonb_populate_record(
            NULL::review_issues, COALESCE(NULLIF(e.doc -> 'iss', 'null'), '{}')) AS iss
        JOIN identities AS i ON i.id = it.reviewer_id
        ORDER BY e.n;
END
$fn$;

-- review_record_iteration's work (queries/reviews.sql states its rules), one table a step:
-- the reviewer, not retired, read FOR SHARE; the review's guarded UPDATE (only under_review;
-- its row lock serialises concurrent recorders and its SET reads the newest counter, which
-- numbers the iteration); the iteration and its issues (in the order given), inserted with
-- the review's uuid (routed to its shard); the mail to the requester (not the reviewer, not
-- retired) with the activity (post_mail); the iteration's rows (ikigai_review_rows). No row:
-- reviewer missing or retired, unknown review, or not under review; nothing written.
CREATE OR REPLACE FUNCTION ikigai_review_record_iteration(
    p_review_id UUID, p_reviewer TEXT, p_decision TEXT, p_to_state TEXT, p_summary TEXT,
    p_suggestions JSONB, p_files_reviewed INTEGER, p_lines_analyzed BIGINT,
    p_duration_ms BIGINT, p_cost_usd DOUBLE PRECISION, p_reviewer_session_id TEXT,
    p_issues JSONB, p_text TEXT, p_subject TEXT, p_body TEXT, p_activity_type TEXT,
    p_description TEXT)
RETURNS TABLE (id BIGINT, review_id UUID, iteration_num INTEGER, reviewer TEXT,
               reviewer_session_id TEXT, decision TEXT, summary TEXT, suggestions JSONB,
               files_reviewed INTEGER, lines_analyzed BIGINT, duration_ms BIGINT,
               cost_usd DOUBLE PRECISION, created_at TIMESTAMPTZ, issue_id BIGINT,
               issue_type TEXT, severity TEXT, file_path TEXT, line_start INTEGER,
               line_end INTEGER, title TEXT, description TEXT, code_snippet TEXT,
               suggestion TEXT, claude_md_ref TEXT, status TEXT, resolved_at TIMESTAMPTZ,
               resolved_in_iteration INTEGER)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    -- The time, read once: Citus evaluates no function in a distributed write's SET.
    now_ts TIMESTAMPTZ := ikigai_now();
    actor RECORD;
    u RECORD;
    requester TEXT;
    issue_count INTEGER := jsonb_array_length(p_issues);
    issue JSONB;
    audience_ids BIGINT[];
    audience_names TEXT[];
    args TEXT[];
BEGIN
    SELECT i.id, i.name INTO actor
    FROM identities AS i
    WHERE i.name = p_reviewer AND i.retired_at IS NULL
    FOR SHARE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE reviews AS r
    SET iterations = r.iterations + 1,
        state = COALESCE(p_to_state, r.state),
        updated_at = now_ts,
        completed_at = CASE WHEN p_to_state IN ('approved', 'rejected') THEN now_ts END
    WHERE r.review_id = p_review_id AND r.state = 'under_review'
    RETURNING r.review_id, r.thread_id, r.requester_id, r.branch, r.priority, r.state,
              r.iterations
    INTO u;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT q.name INTO requester FROM identities AS q WHERE q.id = u.requester_id;
    INSERT INTO review_iterations (review_id, iteration_num, reviewer_id, reviewer_session_id,
                                   decision, summary, suggestions, files_reviewed,
                                   lines_analyzed, duration_ms, cost_usd)
    VALUES (u.review_id, u.iterations, actor.id, p_reviewer_session_id, p_decision, p_summary,
            p_suggestions, p_files_reviewed, p_lines_analyzed, p_duration_ms, p_cost_usd);
    -- One INSERT ... VALUES an issue, in the order given (ids in that order): on Citus each is
    -- routed to the review's shard, and a violation keeps its SQLSTATE (an INSERT ... SELECT
    -- runs through the coordinator there, which reports a worker's violation as XX000).
    FOR issue IN SELECT e.doc FROM jsonb_array_elements(p_issues) WITH ORDINALITY AS e(doc, n)
                 ORDER BY e.n LOOP
        INSERT INTO review_issues (review_id, iteration_num, issue_type, severity, file_path,
                                   line_start, line_end, title, description, code_snippet,
                                   suggestion, claude_md_ref)
        VALUES (u.review_id, u.iterations, issue ->> 'issue_type', issue ->> 'severity',
                issue ->> 'file_path', CAST(issue ->> 'line_start' AS integer),
                CAST(issue ->> 'line_end' AS integer), issue ->> 'title',
                issue ->> 'description', issue ->> 'code_snippet', issue ->> 'suggestion',
                issue ->> 'claude_md_ref');
    END LOOP;
    SELECT COALESCE(array_agg(i.id), '{}'), COALESCE(array_agg(i.name), '{}')
    INTO audience_ids, audience_names
    FROM identities AS i
    WHERE i.id = u.requester_id AND i.id <> actor.id AND i.retired_at IS NULL;
    -- The template arguments, as in review_fire; the eighth is the text parameter (the
    -- summary and the issues, written by reviews.py), the ninth the iteration's number.
    args := ARRAY[left(CAST(u.review_id AS text), 8),
                  COALESCE(u.branch, 'review ' || left(CAST(u.review_id AS text), 8)),
                  actor.name, 'under_review', u.state, requester, '', p_text,
                  CAST(u.iterations AS text)];
    PERFORM post_mail(
        thread_id => u.thread_id, sender_id => actor.id,
        recipient_ids => audience_ids, recipients => audience_names,
        subject => format(p_subject, VARIADIC args),
        body => format(p_body, VARIADIC args),
        priority => u.priority,
        metadata => jsonb_build_object('review_id', u.review_id, 'iteration', u.iterations,
                                       'decision', p_decision, 'state', u.state),
        activity_type => p_activity_type,
        description => format(p_description, VARIADIC args),
        activity_metadata => jsonb_build_object('review_id', u.review_id,
                                                'iteration', u.iterations,
                                                'decision', p_decision,
                                                'from', 'under_review', 'to', u.state,
                                                'issues', issue_count));
    RETURN QUERY SELECT * FROM ikigai_review_rows(u.review_id, u.iterations);
END
$fn$;

-- One issue by its id alone (on Citus it is looked for on every shard), with its review's
-- iteration count (read on the coordinator). No row: no such issue.
CREATE OR REPLACE FUNCTION ikigai_review_issue(p_issue_id BIGINT)
RETURNS TABLE (id BIGINT, review_id UUID, iteration_num INTEGER, issue_type TEXT,
               severity TEXT, file_path TEXT, line_start INTEGER, line_end INTEGER,
               title TEXT, description TEXT, code_snippet TEXT, suggestion TEXT,
               claude_md_ref TEXT, status TEXT, resolved_at TIMESTAMPTZ,
               resolved_in_iteration INTEGER, created_at TIMESTAMPTZ,
               review_iterations INTEGER)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
    doc JSONB;
BEGIN
    SELECT to_jsonb(x) INTO doc FROM review_issues AS x WHERE x.id = p_issue_id;
    IF doc IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT x.id, x.review_id, x.iteration_num, x.issue_type, x.severity, x.file_path,
               x.line_start, x.line_end, x.title, x.description, x.code_snippet,
               x.suggestion, x.claude_md_ref, x.status, x.resolved_at,
               x.resolved_in_iteration, x.created_at, r.iterations
        FROM jsonb_populate_record(NULL::review_issues, doc) AS x
        JOIN reviews AS r ON r.review_id = x.review_id;
END
$fn$;

-- review_resolve_issue's work (queries/reviews.sql states its rules): the issue's review
-- found by the issue's id (on Citus, on every shard), the review's iteration count read on
-- the coordinator, then the guarded UPDATE of the open issue on its review's shard, and the
-- issue's row read there. No row: no such issue, it is not open, or the iteration is not allowed.
CREATE OR REPLACE FUNCTION ikigai_review_resolve_issue(p_issue_id BIGINT, p_status TEXT,
                                                       p_iteration INTEGER)
RETURNS TABLE (id BIGINT, review_id UUID, iteration_num INTEGER, issue_type TEXT,
               severity TEXT, file_path TEXT, line_start INTEGER, line_end INTEGER,
               title TEXT, description TEXT, code_snippet TEXT, suggestion TEXT,
               claude_md_ref TEXT, status TEXT, resolved_at TIMESTAMPTZ,
               resolved_in_iteration INTEGER, created_at TIMESTAMPTZ)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    -- The time, read once: Citus evaluates no function in a distributed write's SET.
    now_ts TIMESTAMPTZ := ikigai_now();
    rid UUID;
    latest INTEGER;
    done BIGINT;
    doc JSONB;
BEGIN
    SELECT x.review_id INTO rid FROM review_issues AS x WHERE x.id = p_issue_id;
    IF rid IS NULL THEN
        RETURN;
    END IF;
    SELECT r.iterations INTO latest FROM reviews AS r WHERE r.review_id = rid;
    UPDATE review_issues AS x
    SET status = p_status, resolved_at = now_ts,
        resolved_in_iteration = COALESCE(p_iteration, latest)
    WHERE x.review_id = rid AND x.id = p_issue_id AND x.status = 'open'
      AND COALESCE(p_iteration, latest) BETWEEN x.iteration_num AND latest
    RETURNING x.id INTO done;
    IF done IS NULL THEN
        RETURN;
    END IF;
    -- (Citus allows no to_jsonb, a stable function, in a distributed write's RETURNING.)
    SELECT to_jsonb(x) INTO doc FROM review_issues AS x
    WHERE x.review_id = rid AND x.id = p_issue_id;
    RETURN QUERY
        SELECT x.id, x.review_id, x.iteration_num, x.issue_type, x.severity, x.file_path,
               x.line_start, x.line_end, x.title, x.description, x.code_snippet,
               x.suggestion, x.claude_md_ref, x.status, x.resolved_at,
               x.resolved_in_iteration, x.created_at
        FROM jsonb_populate_record(NULL::review_issues, doc) AS x;
END
$fn$;

-- This migration's area of the placement (0033: ikigai_distribute() calls it after 0036's, with
-- its lock held and citus checked).
CREATE OR REPLACE FUNCTION ikigai_distribute_0038_reviews()
RETURNS TABLE (relation TEXT, made TEXT)
LANGUAGE plpgsql
AS $fn$
DECLARE
    fk RECORD;
BEGIN
    -- A review's iterations and issues, colocated with each other (a group of their own),
    -- their keys with review_id, review_iterations' keys to reviews and identities
    -- (coordinator tables) gone; review_issues' composite keys to review_iterations come
    -- back once both are placed.
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                   WHERE logicalrelid = 'review_iterations'::regclass AND partmethod = 'h') THEN
        ALTER TABLE review_issues DROP CONSTRAINT IF EXISTS review_issues_iteration_fkey;
        ALTER TABLE review_issues DROP CONSTRAINT IF EXISTS review_issues_resolved_fkey;
        FOR fk IN SELECT conname FROM pg_constraint
                  WHERE conrelid = 'review_iterations'::regclass AND contype = 'f' LOOP
            EXECUTE format('ALTER TABLE review_iterations DROP CONSTRAINT %I', fk.conname);
        END LOOP;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'review_iterations'::regclass
                     AND conname = 'review_iterations_pkey' AND cardinality(conkey) = 1) THEN
            ALTER TABLE review_iterations DROP CONSTRAINT review_iterations_pkey;
            ALTER TABLE review_iterations ADD CONSTRAINT review_iterations_pkey
                PRIMARY KEY (review_id, id);
        END IF;
        PERFORM create_distributed_table('review_iterations', 'review_id',
                                         colocate_with => 'none');
        relation := 'review_iterations';
        made := 'distributed by review_id';
        RETURN NEXT;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                   WHERE logicalrelid = 'review_issues'::regclass AND partmethod = 'h') THEN
        ALTER TABLE review_issues DROP CONSTRAINT IF EXISTS review_issues_iteration_fkey;
        ALTER TABLE review_issues DROP CONSTRAINT IF EXISTS review_issues_resolved_fkey;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'review_issues'::regclass
                     AND conname = 'review_issues_pkey' AND cardinality(conkey) = 1) THEN
            ALTER TABLE review_issues DROP CONSTRAINT review_issues_pkey;
            ALTER TABLE review_issues ADD CONSTRAINT review_issues_pkey
                PRIMARY KEY (review_id, id);
        END IF;
        PERFORM create_distributed_table('review_issues', 'review_id',
                                         colocate_with => 'review_iterations');
        relation := 'review_issues';
        made := 'distributed by review_id, colocated with review_iterations';
        RETURN NEXT;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'review_issues'::regclass
                     AND conname = 'review_issues_iteration_fkey') THEN
        ALTER TABLE review_issues ADD CONSTRAINT review_issues_iteration_fkey
            FOREIGN KEY (review_id, iteration_num)
            REFERENCES review_iterations (review_id, iteration_num);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'review_issues'::regclass
                     AND conname = 'review_issues_resolved_fkey') THEN
        ALTER TABLE review_issues ADD CONSTRAINT review_issues_resolved_fkey
            FOREIGN KEY (review_id, resolved_in_iteration)
            REFERENCES review_iterations (review_id, iteration_num);
    END IF;
END
$fn$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM ikigai_distribute();
    END IF;
END
$$;

UPDATE schema_metadata SET schema_version = 38 WHERE schema_version < 38;
