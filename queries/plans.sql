-- Plan reviews (migration 0012): a requester asks a reviewer (by default the human, "User") to
-- approve a plan before acting on it. pending -> approved | rejected | changes_requested, and
-- changes_requested -> pending again by a resubmission. Each change is one conditional
-- statement that also writes its mail (on the plan's thread) and its activity: a refused
-- change writes nothing. Reads return plans with names; order is id.

-- name: plan_submit(plan_review_id, requester, reviewer, ensure_reviewer, plan_path, title, summary, session_key, subject, body, description)^
-- Submit a plan (state pending), its request mail from the requester to the reviewer on the
-- plan's new thread (none when the reviewer is the requester) and the plan_submitted activity,
-- in one statement. The requester and reviewer must exist and not be retired (locked FOR
-- SHARE); with ensure_reviewer a missing reviewer is registered first (the human, "User"), but
-- only when the requester can submit. No row: requester missing or retired, reviewer missing
-- (or registered concurrently: try again) or retired. subject, body and description are
-- format() templates over the values of f below.
WITH rq AS (
    SELECT id, name FROM identities WHERE name = :requester AND retired_at IS NULL FOR SHARE
), named AS (
    SELECT id, name, retired_at FROM identities WHERE name = :reviewer FOR SHARE
), ensured AS (
    INSERT INTO identities (name, purpose)
    SELECT :reviewer, 'the human user: plan reviews go to it unless another reviewer is named'
    WHERE :ensure_reviewer AND EXISTS (SELECT 1 FROM rq) AND NOT EXISTS (SELECT 1 FROM named)
    ON CONFLICT DO NOTHING
    RETURNING id, name
), rv AS (
    SELECT id, name FROM named WHERE retired_at IS NULL
    UNION ALL
    SELECT id, name FROM ensured
), audience AS (
    SELECT rv.id, rv.name FROM rv, rq WHERE rv.id <> rq.id
), f AS (
    -- The template arguments, in order: short id, title, actor (the requester), state
    -- before (none), state after, requester, plan path, summary, revision.
    SELECT ARRAY[left(CAST(:plan_review_id AS text), 8), CAST(:title AS text), rq.name, '',
                 'pending', rq.name, CAST(:plan_path AS text), CAST(:summary AS text),
                 '1'] AS args
    FROM rq, rv
), posted AS (
    -- The request mail, its recipient row and the plan_submitted activity (post_mail,
    -- migration 0016); p reads it, which makes it run. A new plan's revision is 1.
    SELECT post_mail(
               thread_id => 'plan-' || left(CAST(:plan_review_id AS text), 8),
               sender_id => rq.id,
               recipient_ids => ARRAY(SELECT a.id FROM audience AS a),
               recipients => ARRAY(SELECT a.name FROM audience AS a),
               subject => format(:subject, VARIADIC f.args),
               body => format(:body, VARIADIC f.args),
               priority => 'normal',
               metadata => jsonb_build_object('plan_review_id', CAST(:plan_review_id AS uuid),
                                              'state', 'pending', 'revision', 1),
               activity_type => 'plan_submitted',
               description => format(:description, VARIADIC f.args),
               activity_metadata => jsonb_build_object('plan_review_id',
                                                       CAST(:plan_review_id AS uuid),
                                                       'revision', 1, 'reviewer', rv.name)
           ) AS mail
    FROM rq, rv, f
), p AS (
    INSERT INTO plan_reviews (plan_review_id, mail_id, requester_id, reviewer_id, plan_path,
                              title, summary, session_key)
    SELECT CAST(:plan_review_id AS uuid), (posted.mail).id, rq.id, rv.id, :plan_path,
           :title, :summary, :session_key
    FROM rq, rv, posted
    RETURNING *
)
SELECT p.id, p.plan_review_id, p.thread_id, p.mail_id, rq.name AS requester,
       rv.name AS reviewer, p.plan_path, p.title, p.summary, p.state, p.reviewer_comment,
       CAST(NULL AS text) AS reviewed_by, p.session_key, p.revision, p.created_at,
       p.updated_at, p.reviewed_at
FROM p, rq, rv;

-- name: plan_get(plan_review_id)^
-- One plan review by its uuid.
SELECT p.id, p.plan_review_id, p.thread_id, p.mail_id, q.name AS requester, r.name AS reviewer,
       p.plan_path, p.title, p.summary, p.state, p.reviewer_comment, b.name AS reviewed_by,
       p.session_key, p.revision, p.created_at, p.updated_at, p.reviewed_at
FROM plan_reviews AS p
JOIN identities AS q ON q.id = p.requester_id
JOIN identities AS r ON r.id = p.reviewer_id
LEFT JOIN identities AS b ON b.id = p.reviewed_by_id
WHERE p.plan_review_id = CAST(:plan_review_id AS uuid);

-- name: plan_by_thread(thread_id)^
-- The plan review whose mail thread this is.
SELECT p.id, p.plan_review_id, p.thread_id, p.mail_id, q.name AS requester, r.name AS reviewer,
       p.plan_path, p.title, p.summary, p.state, p.reviewer_comment, b.name AS reviewed_by,
       p.session_key, p.revision, p.created_at, p.updated_at, p.reviewed_at
FROM plan_reviews AS p
JOIN identities AS q ON q.id = p.requester_id
JOIN identities AS r ON r.id = p.reviewer_id
LEFT JOIN identities AS b ON b.id = p.reviewed_by_id
WHERE p.thread_id = :thread_id;

-- name: plan_pending_for_session(session_key)
-- A session's plan reviews waiting for a decision (state pending), oldest first.
SELECT p.id, p.plan_review_id, p.thread_id, p.mail_id, q.name AS requester, r.name AS reviewer,
       p.plan_path, p.title, p.summary, p.state, p.reviewer_comment, b.name AS reviewed_by,
       p.session_key, p.revision, p.created_at, p.updated_at, p.reviewed_at
FROM plan_reviews AS p
JOIN identities AS q ON q.id = p.requester_id
JOIN identities AS r ON r.id = p.reviewer_id
LEFT JOIN identities AS b ON b.id = p.reviewed_by_id
WHERE p.session_key = :session_key AND p.state = 'pending'
ORDER BY p.id;

-- name: plan_list(state, requester, before_id, limit)
-- Plan reviews, newest first, optionally in one state and/or of one requester. Keyset
-- pagination: ids < before_id.
SELECT p.id, p.plan_review_id, p.thread_id, p.mail_id, q.name AS requester, r.name AS reviewer,
       p.plan_path, p.title, p.summary, p.state, p.reviewer_comment, b.name AS reviewed_by,
       p.session_key, p.revision, p.created_at, p.updated_at, p.reviewed_at
FROM plan_reviews AS p
JOIN identities AS q ON q.id = p.requester_id
JOIN identities AS r ON r.id = p.reviewer_id
LEFT JOIN identities AS b ON b.id = p.reviewed_by_id
WHERE (CAST(:state AS text) IS NULL OR p.state = :state)
  AND (CAST(:requester AS text) IS NULL
       OR p.requester_id = (SELECT id FROM identities WHERE name = :requester))
  AND (CAST(:before_id AS bigint) IS NULL OR p.id < :before_id)
ORDER BY p.id DESC
LIMIT :limit;

-- name: plan_decide(plan_review_id, state, comment, reviewed_by, subject, body, description)^
-- Decide a pending plan (approved, rejected or changes_requested), in one statement: the
-- decider is reviewed_by, else the plan's reviewer (not retired, locked FOR SHARE); the UPDATE
-- applies only while the plan is pending; then the decision mail from the decider to the
-- requester (not to itself, not when retired) on the plan's thread and the plan_decided
-- activity. No row: unknown plan, decider missing or retired, or not pending.
WITH actor AS (
    SELECT i.id, i.name
    FROM identities AS i
    WHERE i.retired_at IS NULL
      AND i.name = COALESCE(CAST(:reviewed_by AS text),
                            (SELECT r.name
                             FROM plan_reviews AS p JOIN identities AS r ON r.id = p.reviewer_id
                             WHERE p.plan_review_id = CAST(:plan_review_id AS uuid)))
    FOR SHARE
), u AS (
    UPDATE plan_reviews AS p
    SET state = :state, reviewer_comment = :comment, reviewed_by_id = actor.id,
        reviewed_at = ikigai_now(), updated_at = ikigai_now()
    FROM actor
    WHERE p.plan_review_id = CAST(:plan_review_id AS uuid) AND p.state = 'pending'
    RETURNING p.*, actor.name AS actor_name
), names AS (
    SELECT q.name AS requester, r.name AS reviewer
    FROM u
    JOIN identities AS q ON q.id = u.requester_id
    JOIN identities AS r ON r.id = u.reviewer_id
), audience AS (
    SELECT i.id, i.name
    FROM u, identities AS i
    WHERE i.id = u.requester_id AND i.id <> u.reviewed_by_id AND i.retired_at IS NULL
), f AS (
    -- As in plan_submit; the actor is the decider, the eighth argument the comment.
    SELECT ARRAY[left(CAST(u.plan_review_id AS text), 8), u.title, u.actor_name, 'pending',
                 u.state, names.requester, u.plan_path, COALESCE(u.reviewer_comment, ''),
                 CAST(u.revision AS text)] AS args
    FROM u, names
), posted AS (
    -- The decision mail, its recipient row and the plan_decided activity (post_mail,
    -- migration 0016); read by the main query, which makes it run.
    SELECT post_mail(
               thread_id => u.thread_id, sender_id => u.reviewed_by_id,
               recipient_ids => ARRAY(SELECT a.id FROM audience AS a),
               recipients => ARRAY(SELECT a.name FROM audience AS a),
               subject => format(:subject, VARIADIC f.args),
               body => format(:body, VARIADIC f.args),
               priority => 'normal',
               metadata => jsonb_build_object('plan_review_id', u.plan_review_id,
                                              'state', u.state, 'revision', u.revision),
               activity_type => 'plan_decided',
               description => format(:description, VARIADIC f.args),
               activity_metadata => jsonb_build_object('plan_review_id', u.plan_review_id,
                                                       'state', u.state,
                                                       'revision', u.revision)
           ) AS mail
    FROM u, f
)
SELECT u.id, u.plan_review_id, u.thread_id, u.mail_id, names.requester, names.reviewer,
       u.plan_path, u.title, u.summary, u.state, u.reviewer_comment, u.actor_name AS reviewed_by,
       u.session_key, u.revision, u.created_at, u.updated_at, u.reviewed_at
FROM u, names, posted;

-- name: plan_resubmit(plan_review_id, summary, plan_path, subject, body, description)^
-- Resubmit a plan whose changes were requested, in one statement: lock it (FOR UPDATE: its
-- state as of now), and only if it is changes_requested and its requester is not retired,
-- mail the reviewer (the new request, on the plan's thread; not when retired or the
-- requester itself), make it pending again with revision + 1, the new summary and path when
-- given and no decision, and record plan_submitted. No row: unknown plan, requester retired,
-- or not changes_requested.
WITH cur AS (
    SELECT p.id, p.plan_review_id, p.thread_id, p.state, p.requester_id, p.reviewer_id,
           p.title, p.revision + 1 AS revision,
           COALESCE(CAST(:summary AS text), p.summary) AS summary,
           COALESCE(CAST(:plan_path AS text), p.plan_path) AS plan_path
    FROM plan_reviews AS p
    WHERE p.plan_review_id = CAST(:plan_review_id AS uuid)
    FOR UPDATE
), rq AS (
    SELECT i.id, i.name
    FROM cur JOIN identities AS i ON i.id = cur.requester_id
    WHERE cur.state = 'changes_requested' AND i.retired_at IS NULL
    FOR SHARE OF i
), rv AS (
    SELECT i.id, i.name FROM cur JOIN identities AS i ON i.id = cur.reviewer_id
), audience AS (
    SELECT rv.id, rv.name
    FROM rv, rq, identities AS i
    WHERE i.id = rv.id AND rv.id <> rq.id AND i.retired_at IS NULL
), f AS (
    -- As in plan_submit: the actor is the requester.
    SELECT ARRAY[left(CAST(cur.plan_review_id AS text), 8), cur.title, rq.name,
                 'changes_requested', 'pending', rq.name, cur.plan_path, cur.summary,
                 CAST(cur.revision AS text)] AS args
    FROM cur, rq
), posted AS (
    -- The new request mail, its recipient row and the plan_submitted activity (post_mail,
    -- migration 0016); u reads it, which makes it run.
    SELECT post_mail(
               thread_id => cur.thread_id, sender_id => rq.id,
               recipient_ids => ARRAY(SELECT a.id FROM audience AS a),
               recipients => ARRAY(SELECT a.name FROM audience AS a),
               subject => format(:subject, VARIADIC f.args),
               body => format(:body, VARIADIC f.args),
               priority => 'normal',
               metadata => jsonb_build_object('plan_review_id', cur.plan_review_id,
                                              'state', 'pending', 'revision', cur.revision),
               activity_type => 'plan_submitted',
               description => format(:description, VARIADIC f.args),
               activity_metadata => jsonb_build_object('plan_review_id', cur.plan_review_id,
                                                       'revision', cur.revision,
                                                       'reviewer', rv.name)
           ) AS mail
    FROM cur, rq, rv, f
), u AS (
    UPDATE plan_reviews AS p
    SET state = 'pending', summary = cur.summary, plan_path = cur.plan_path,
        revision = cur.revision, mail_id = (posted.mail).id, reviewer_comment = NULL,
        reviewed_by_id = NULL, reviewed_at = NULL, updated_at = ikigai_now()
    FROM cur, rq, posted
    WHERE p.id = cur.id
    RETURNING p.*
)
SELECT u.id, u.plan_review_id, u.thread_id, u.mail_id, rq.name AS requester,
       rv.name AS reviewer, u.plan_path, u.title, u.summary, u.state, u.reviewer_comment,
       CAST(NULL AS text) AS reviewed_by, u.session_key, u.revision, u.created_at,
       u.updated_at, u.reviewed_at
FROM u, rq, rv;

-- name: plan_refusal(plan_review_id)^
-- Why a plan change wrote nothing (rare path): its state now, requester and reviewer. No
-- row: no such plan review.
SELECT p.state, q.name AS requester, r.name AS reviewer
FROM plan_reviews AS p
JOIN identities AS q ON q.id = p.requester_id
JOIN identities AS r ON r.id = p.reviewer_id
WHERE p.plan_review_id = CAST(:plan_review_id AS uuid);
