-- Code reviews (migration 0012): the seed's review state machine, iterations and issues. Every
-- state change is one conditional UPDATE (WHERE state = ANY(allowed sources); reviews.py holds
-- the table) that also writes the change's mail (on the review's thread) and its activity, in
-- the same statement: a refused change writes nothing at all. Reads return reviews with the
-- requester's name; order is id. On Citus (migration 0038) reviews stays on the coordinator
-- and a review's iterations and issues are on one shard (by review_id): the statements that
-- touch them and a coordinator table are functions of 0038, one step a table.

-- name: review_create(review_id, requester, reviewers, pr_number, branch, base_branch, commit_sha, repo_path, remote_url, review_type, priority)^
-- Create a review in state new. The requester and every reviewer must exist and not be
-- retired (locked FOR SHARE, so a concurrent retire lands before or after). No row otherwise
-- (reviews.py explains which); a thread id taken by another review is a unique violation.
WITH rq AS (
    SELECT id FROM identities WHERE name = :requester AND retired_at IS NULL FOR SHARE
), rv AS (
    SELECT id FROM identities
    WHERE name = ANY(CAST(:reviewers AS text[])) AND retired_at IS NULL
    FOR SHARE
)
INSERT INTO reviews AS r (review_id, requester_id, reviewers, pr_number, branch, base_branch,
                          commit_sha, repo_path, remote_url, review_type, priority)
SELECT CAST(:review_id AS uuid), rq.id, CAST(:reviewers AS text[]), :pr_number, :branch,
       :base_branch, :commit_sha, :repo_path, :remote_url, :review_type, :priority
FROM rq
WHERE (SELECT count(*) FROM rv) = cardinality(CAST(:reviewers AS text[]))
RETURNING r.id, r.review_id, r.thread_id, CAST(:requester AS text) AS requester, r.reviewers,
          r.pr_number, r.branch, r.base_branch, r.commit_sha, r.repo_path, r.remote_url,
          r.review_type, r.priority, r.state, r.iterations, r.created_at, r.updated_at,
          r.completed_at;

-- name: review_people(names)
-- Which of the names exist and whether each is retired (why a write naming them was refused).
SELECT n AS name, i.id IS NOT NULL AS found, i.retired_at IS NOT NULL AS retired
FROM unnest(CAST(:names AS text[])) AS n
LEFT JOIN identities AS i ON i.name = n
ORDER BY n;

-- name: review_get(review_id)^
-- One review by its uuid.
SELECT r.id, r.review_id, r.thread_id, q.name AS requester, r.reviewers, r.pr_number, r.branch,
       r.base_branch, r.commit_sha, r.repo_path, r.remote_url, r.review_type, r.priority,
       r.state, r.iterations, r.created_at, r.updated_at, r.completed_at
FROM reviews AS r
JOIN identities AS q ON q.id = r.requester_id
WHERE r.review_id = CAST(:review_id AS uuid);

-- name: review_list(state, requester, before_id, limit)
-- Reviews, newest first, optionally in one state and/or of one requester. Keyset pagination:
-- ids < before_id.
SELECT r.id, r.review_id, r.thread_id, q.name AS requester, r.reviewers, r.pr_number, r.branch,
       r.base_branch, r.commit_sha, r.repo_path, r.remote_url, r.review_type, r.priority,
       r.state, r.iterations, r.created_at, r.updated_at, r.completed_at
FROM reviews AS r
JOIN identities AS q ON q.id = r.requester_id
WHERE (CAST(:state AS text) IS NULL OR r.state = :state)
  AND (CAST(:requester AS text) IS NULL
       OR r.requester_id = (SELECT id FROM identities WHERE name = :requester))
  AND (CAST(:before_id AS bigint) IS NULL OR r.id < :before_id)
ORDER BY r.id DESC
LIMIT :limit;

-- name: review_active()
-- Every review that is not finished (not approved, rejected or cancelled), oldest first: what
-- a restarted reviewer or requester picks up again.
SELECT r.id, r.review_id, r.thread_id, q.name AS requester, r.reviewers, r.pr_number, r.branch,
       r.base_branch, r.commit_sha, r.repo_path, r.remote_url, r.review_type, r.priority,
       r.state, r.iterations, r.created_at, r.updated_at, r.completed_at
FROM reviews AS r
JOIN identities AS q ON q.id = r.requester_id
WHERE r.state NOT IN ('approved', 'rejected', 'cancelled')
ORDER BY r.id;

-- name: review_by_prefix(low, high)^
-- The oldest review whose uuid lies in [low, high] (every uuid starting with a hex prefix:
-- the prefix padded with 0s, and with fs), and how many do: an index range scan, no LIKE.
SELECT r.id, r.review_id, r.thread_id, q.name AS requester, r.reviewers, r.pr_number, r.branch,
       r.base_branch, r.commit_sha, r.repo_path, r.remote_url, r.review_type, r.priority,
       r.state, r.iterations, r.created_at, r.updated_at, r.completed_at,
       count(*) OVER () AS matches
FROM reviews AS r
JOIN identities AS q ON q.id = r.requester_id
WHERE r.review_id BETWEEN CAST(:low AS uuid) AND CAST(:high AS uuid)
ORDER BY r.id
LIMIT 1;

-- name: review_fire(review_id, event, to_state, from_states, by, default_actor, audience, subject, body, activity_type, description)^
-- The guarded transition, with its mail and activity, in one statement. The review row is
-- locked first (FOR UPDATE gives its state as of now, even right after a concurrent change);
-- the actor is the identity named by the by parameter, else the requester or the first
-- reviewer (default_actor), not retired, locked FOR SHARE. The state moves to to_state only
-- from one of from_states; completed_at is set on entering a terminal state. Then a mail goes
-- on the review's thread from the actor to the audience: 'reviewers', 'requester', or
-- 'participants' (the requester and, unless the review was still new, the reviewers); never
-- to the actor or a retired identity, and no mail at all when that leaves no one. subject,
-- body and description are format() templates over the values of f below. No row: unknown
-- review, actor missing or retired, or the event is not allowed in the current state.
WITH cur AS (
    SELECT r.id, r.state, r.requester_id, r.reviewers
    FROM reviews AS r
    WHERE r.review_id = CAST(:review_id AS uuid)
    FOR UPDATE
), actor AS (
    SELECT i.id, i.name
    FROM identities AS i
    WHERE i.retired_at IS NULL
      AND i.name = COALESCE(CAST(:by AS text),
                            (SELECT CASE WHEN :default_actor = 'requester'
                                         THEN (SELECT q.name FROM identities AS q
                                               WHERE q.id = cur.requester_id)
                                         ELSE cur.reviewers[1] END
                             FROM cur))
    FOR SHARE
), u AS (
    UPDATE reviews AS r
    SET state = :to_state,
        updated_at = ikigai_now(),
        completed_at = CASE WHEN :to_state IN ('approved', 'rejected', 'cancelled')
                            THEN ikigai_now() END
    FROM cur, actor
    WHERE r.id = cur.id AND cur.state = ANY(CAST(:from_states AS text[]))
    RETURNING r.*, cur.state AS from_state, actor.id AS actor_id, actor.name AS actor_name
), q AS (
    SELECT i.name FROM u JOIN identities AS i ON i.id = u.requester_id
), audience AS (
    SELECT i.id, i.name
    FROM u, identities AS i
    WHERE i.retired_at IS NULL AND i.id <> u.actor_id
      AND ((:audience IN ('requester', 'participants') AND i.id = u.requester_id)
           OR (:audience = 'reviewers' AND i.name = ANY(u.reviewers))
           OR (:audience = 'participants' AND u.from_state <> 'new'
               AND i.name = ANY(u.reviewers)))
), f AS (
    -- The template arguments, in order: short id, what is reviewed (branch), actor, state
    -- before, state after, requester, the review's details, (unused here), iterations.
    SELECT ARRAY[left(CAST(u.review_id AS text), 8),
                 COALESCE(u.branch, 'review ' || left(CAST(u.review_id AS text), 8)),
                 u.actor_name, u.from_state, u.state, q.name,
                 concat_ws(E'\n',
                           'review: ' || CAST(u.review_id AS text) || ' (' || u.review_type
                               || ', priority ' || u.priority || ')',
                           'requester: ' || q.name,
                           'reviewers: ' || array_to_string(u.reviewers, ', '),
                           'branch: ' || u.branch || ' -> ' || u.base_branch,
                           'commit: ' || u.commit_sha,
                           'pull request: #' || u.pr_number,
                           'repository: ' || u.repo_path,
                           'remote: ' || u.remote_url),
                 '', CAST(u.iterations AS text)] AS args
    FROM u, q
), posted AS (
    -- The mail, its recipient rows and the activity (post_mail, migration 0016); read by the
    -- main query, which makes it run.
    SELECT post_mail(
               thread_id => u.thread_id, sender_id => u.actor_id,
               recipient_ids => ARRAY(SELECT a.id FROM audience AS a),
               recipients => ARRAY(SELECT a.name FROM audience AS a ORDER BY a.name COLLATE "C"),
               subject => format(:subject, VARIADIC f.args),
               body => format(:body, VARIADIC f.args),
               priority => u.priority,
               metadata => jsonb_build_object('review_id', u.review_id,
                                              'event', CAST(:event AS text), 'state', u.state),
               activity_type => :activity_type,
               description => format(:description, VARIADIC f.args),
               activity_metadata => jsonb_build_object('review_id', u.review_id,
                                                       'event', CAST(:event AS text),
                                                       'from', u.from_state, 'to', u.state)
           ) AS mail
    FROM u, f
)
SELECT u.id, u.review_id, u.thread_id, q.name AS requester, u.reviewers, u.pr_number, u.branch,
       u.base_branch, u.commit_sha, u.repo_path, u.remote_url, u.review_type, u.priority,
       u.state, u.iterations, u.created_at, u.updated_at, u.completed_at,
       (posted.mail).id AS mail_id
FROM u, q, posted;

-- name: review_refusal(review_id)^
-- Why a guarded change wrote nothing (rare path): the review's state now, its requester and
-- first reviewer (the default actors). No row: no such review.
SELECT r.state, q.name AS requester, r.reviewers[1] AS first_reviewer
FROM reviews AS r
JOIN identities AS q ON q.id = r.requester_id
WHERE r.review_id = CAST(:review_id AS uuid);

-- name: review_record_iteration(review_id, reviewer, decision, to_state, summary, suggestions, files_reviewed, lines_analyzed, duration_ms, cost_usd, reviewer_session_id, issues, text, subject, body, activity_type, description)
-- Record one review iteration, in one statement (ikigai_review_record_iteration, migration
-- 0038: on Citus the iteration and its issues are written on the review's one shard): only
-- while the review is under_review, bump its iteration counter (the UPDATE's row lock
-- serialises concurrent recorders, and the SET sees the newest counter: numbers are 1, 2,
-- 3... without gaps or duplicates) and move it to to_state (NULL: stay, for a comment); insert
-- the iteration numbered by the counter and its issues (the issues parameter, a JSON array, in
-- order); mail the requester (not the reviewer itself, not when retired) on the review's
-- thread and record the activity. One row per issue (issue columns NULL when there is none).
-- No row: unknown review, reviewer missing or retired, or the review is not under review.
SELECT * FROM ikigai_review_record_iteration(
    p_review_id => CAST(:review_id AS uuid), p_reviewer => CAST(:reviewer AS text),
    p_decision => CAST(:decision AS text), p_to_state => CAST(:to_state AS text),
    p_summary => CAST(:summary AS text), p_suggestions => CAST(:suggestions AS jsonb),
    p_files_reviewed => CAST(:files_reviewed AS integer),
    p_lines_analyzed => CAST(:lines_analyzed AS bigint),
    p_duration_ms => CAST(:duration_ms AS bigint),
    p_cost_usd => CAST(:cost_usd AS double precision),
    p_reviewer_session_id => CAST(:reviewer_session_id AS text),
    p_issues => CAST(:issues AS jsonb), p_text => CAST(:text AS text),
    p_subject => CAST(:subject AS text), p_body => CAST(:body AS text),
    p_activity_type => CAST(:activity_type AS text),
    p_description => CAST(:description AS text));

-- name: review_iterations(review_id)
-- A review's iterations in order, each with its issues (one row per issue; issue columns NULL
-- for an iteration without issues): ikigai_review_rows (migration 0038), one statement on the
-- review's shard on Citus.
SELECT * FROM ikigai_review_rows(CAST(:review_id AS uuid), NULL);

-- name: review_issues(review_id)
-- Every issue of a review, by id.
SELECT id, review_id, iteration_num, issue_type, severity, file_path, line_start, line_end,
       title, description, code_snippet, suggestion, claude_md_ref, status, resolved_at,
       resolved_in_iteration, created_at
FROM review_issues
WHERE review_id = CAST(:review_id AS uuid)
ORDER BY id;

-- name: review_open_issues(review_id)
-- A review's open issues, most severe first (critical, high, medium, low: by rank, not by
-- name), then by id.
SELECT id, review_id, iteration_num, issue_type, severity, file_path, line_start, line_end,
       title, description, code_snippet, suggestion, claude_md_ref, status, resolved_at,
       resolved_in_iteration, created_at
FROM review_issues
WHERE review_id = CAST(:review_id AS uuid) AND status = 'open'
ORDER BY array_position(ARRAY['critical', 'high', 'medium', 'low'], severity), id;

-- name: review_resolve_issue(issue_id, status, iteration)^
-- Resolve an open issue (fixed, wont_fix or duplicate) in an iteration of its review (NULL:
-- the review's latest), not one before the issue's own (ikigai_review_resolve_issue,
-- migration 0038: on Citus the issue is found by its id on every shard, then updated on its
-- review's). No row: no such issue, it is not open, or the iteration is not allowed
-- (reviews.py says which).
SELECT * FROM ikigai_review_resolve_issue(CAST(:issue_id AS bigint), CAST(:status AS text),
                                          CAST(:iteration AS integer));

-- name: review_issue(issue_id)^
-- One issue, with its review's iteration count (why review_resolve_issue refused): on Citus
-- found by its id on every shard (ikigai_review_issue, migration 0038).
SELECT * FROM ikigai_review_issue(CAST(:issue_id AS bigint));
