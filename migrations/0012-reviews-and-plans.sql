-- Code reviews and plan reviews (seed 004's reviews, review_iterations, review_issues and
-- plan_reviews; issue 10). Invariants the schema itself keeps:
-- - a review's state is one of the seed's eight, and completed_at is set exactly when it is
--   terminal (approved, rejected, cancelled); review_type is the seed's four plus architecture;
--   priority is a mail priority; a review names 1 to 100 reviewers (identity names, which are
--   never renamed or deleted);
-- - review_id is a UUID; thread_id, the review's mail thread, is 'review-' and its first 8 hex
--   digits, generated from it and unique: an 8-digit prefix always names one review and one
--   thread (plan reviews likewise, 'plan-' and 8 digits);
-- - iterations are numbered 1, 2, 3... per review, gapless: reviews.iterations counts them, and
--   a new iteration takes its number from that counter in the UPDATE that increments it, under
--   the review's row lock (UNIQUE (review_id, iteration_num) backs it up); a decision is one of
--   approve, request_changes, comment, reject (Subtrate's CHECK lacked reject);
-- - an issue belongs to an iteration of its review; its type (the seed's, unknown ones are
--   refused, never mapped), severity and status are closed sets; lines are positive, a line
--   range needs a start and start <= end, a line needs a file; an open issue has no resolution,
--   a resolved one has its time and the iteration (of the same review, not before its own)
--   that resolved it;
-- - a plan review is pending, approved, rejected or changes_requested; it is pending exactly
--   when it has no decision (reviewed_at, reviewed_by_id); revision counts its submissions.
-- State changes are guarded by the conditional UPDATEs of queries/reviews.sql and plans.sql
-- (WHERE state = ANY(allowed)), which also write the change's mail and activity in the same
-- statement. Order is id everywhere.
-- depends: 0011-activities-and-summaries

CREATE TABLE IF NOT EXISTS reviews (
    id           BIGSERIAL PRIMARY KEY,
    review_id    UUID NOT NULL CONSTRAINT reviews_review_id_key UNIQUE,
    thread_id    TEXT GENERATED ALWAYS AS ('review-' || left(CAST(review_id AS text), 8)) STORED
                 CONSTRAINT reviews_thread_id_key UNIQUE,
    requester_id BIGINT NOT NULL REFERENCES identities (id),
    reviewers    TEXT[] NOT NULL
                 CONSTRAINT reviews_reviewers_check
                 CHECK (cardinality(reviewers) BETWEEN 1 AND 100 AND array_position(reviewers, NULL) IS NULL),
    pr_number    BIGINT CONSTRAINT reviews_pr_number_check CHECK (pr_number > 0),
    branch       TEXT,
    base_branch  TEXT NOT NULL DEFAULT 'main',
    commit_sha   TEXT,
    repo_path    TEXT,
    remote_url   TEXT,
    review_type  TEXT NOT NULL DEFAULT 'full'
                 CONSTRAINT reviews_review_type_check CHECK (review_type IN (
                     'full', 'incremental', 'security', 'performance', 'architecture')),
    priority     TEXT NOT NULL DEFAULT 'normal'
                 CONSTRAINT reviews_priority_check CHECK (priority IN ('urgent', 'normal', 'low')),
    state        TEXT NOT NULL DEFAULT 'new'
                 CONSTRAINT reviews_state_check CHECK (state IN (
                     'new', 'pending_review', 'under_review', 'changes_requested', 're_review',
                     'approved', 'rejected', 'cancelled')),
    iterations   INTEGER NOT NULL DEFAULT 0
                 CONSTRAINT reviews_iterations_check CHECK (iterations >= 0),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    completed_at TIMESTAMPTZ,
    CONSTRAINT reviews_completed_check
        CHECK ((state IN ('approved', 'rejected', 'cancelled')) = (completed_at IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS reviews_requester_idx ON reviews (requester_id, id);
CREATE INDEX IF NOT EXISTS reviews_state_idx ON reviews (state, id);
-- What restart recovery (active_reviews) walks: the reviews that are not finished.
CREATE INDEX IF NOT EXISTS reviews_active_idx ON reviews (id)
    WHERE state NOT IN ('approved', 'rejected', 'cancelled');

CREATE TABLE IF NOT EXISTS review_iterations (
    id                  BIGSERIAL PRIMARY KEY,
    review_id           UUID NOT NULL REFERENCES reviews (review_id),
    iteration_num       INTEGER NOT NULL
                        CONSTRAINT review_iterations_num_check CHECK (iteration_num >= 1),
    reviewer_id         BIGINT NOT NULL REFERENCES identities (id),
    reviewer_session_id TEXT,
    decision            TEXT NOT NULL
                        CONSTRAINT review_iterations_decision_check
                        CHECK (decision IN ('approve', 'request_changes', 'comment', 'reject')),
    summary             TEXT NOT NULL,
    suggestions         JSONB,
    files_reviewed      INTEGER CONSTRAINT review_iterations_files_check CHECK (files_reviewed >= 0),
    lines_analyzed      BIGINT CONSTRAINT review_iterations_lines_check CHECK (lines_analyzed >= 0),
    duration_ms         BIGINT CONSTRAINT review_iterations_duration_check CHECK (duration_ms >= 0),
    cost_usd            DOUBLE PRECISION
                        CONSTRAINT review_iterations_cost_check CHECK (cost_usd >= 0),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    CONSTRAINT review_iterations_num_key UNIQUE (review_id, iteration_num)
);

CREATE TABLE IF NOT EXISTS review_issues (
    id                    BIGSERIAL PRIMARY KEY,
    review_id             UUID NOT NULL,
    iteration_num         INTEGER NOT NULL,
    issue_type            TEXT NOT NULL
                          CONSTRAINT review_issues_type_check CHECK (issue_type IN (
                              'bug', 'security', 'claude_md_violation', 'logic_error',
                              'performance', 'style', 'documentation', 'other')),
    severity              TEXT NOT NULL
                          CONSTRAINT review_issues_severity_check
                          CHECK (severity IN ('critical', 'high', 'medium', 'low')),
    file_path             TEXT,
    line_start            INTEGER CONSTRAINT review_issues_line_start_check CHECK (line_start >= 1),
    line_end              INTEGER,
    title                 TEXT NOT NULL,
    description           TEXT NOT NULL,
    code_snippet          TEXT,
    suggestion            TEXT,
    claude_md_ref         TEXT,
    status                TEXT NOT NULL DEFAULT 'open'
                          CONSTRAINT review_issues_status_check
                          CHECK (status IN ('open', 'fixed', 'wont_fix', 'duplicate')),
    resolved_at           TIMESTAMPTZ,
    resolved_in_iteration INTEGER,
    created_at            TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    CONSTRAINT review_issues_iteration_fkey FOREIGN KEY (review_id, iteration_num)
        REFERENCES review_iterations (review_id, iteration_num),
    CONSTRAINT review_issues_resolved_fkey FOREIGN KEY (review_id, resolved_in_iteration)
        REFERENCES review_iterations (review_id, iteration_num),
    CONSTRAINT review_issues_lines_check
        CHECK (line_end IS NULL OR (line_start IS NOT NULL AND line_end >= line_start)),
    CONSTRAINT review_issues_location_check CHECK (line_start IS NULL OR file_path IS NOT NULL),
    CONSTRAINT review_issues_resolution_check
        CHECK ((status = 'open') = (resolved_at IS NULL)
               AND (resolved_at IS NULL) = (resolved_in_iteration IS NULL)
               AND (resolved_in_iteration IS NULL OR resolved_in_iteration >= iteration_num))
);
CREATE INDEX IF NOT EXISTS review_issues_review_idx ON review_issues (review_id, iteration_num);
-- open_issues: a review's open issues (sorted by severity rank, then id, over this small set).
CREATE INDEX IF NOT EXISTS review_issues_open_idx ON review_issues (review_id, id)
    WHERE status = 'open';

CREATE TABLE IF NOT EXISTS plan_reviews (
    id               BIGSERIAL PRIMARY KEY,
    plan_review_id   UUID NOT NULL CONSTRAINT plan_reviews_plan_review_id_key UNIQUE,
    thread_id        TEXT GENERATED ALWAYS AS ('plan-' || left(CAST(plan_review_id AS text), 8))
                     STORED CONSTRAINT plan_reviews_thread_id_key UNIQUE,
    mail_id          BIGINT REFERENCES mail (id) ON DELETE SET NULL,
    requester_id     BIGINT NOT NULL REFERENCES identities (id),
    reviewer_id      BIGINT NOT NULL REFERENCES identities (id),
    plan_path        TEXT NOT NULL,
    title            TEXT NOT NULL,
    summary          TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'pending'
                     CONSTRAINT plan_reviews_state_check
                     CHECK (state IN ('pending', 'approved', 'rejected', 'changes_requested')),
    reviewer_comment TEXT,
    reviewed_by_id   BIGINT REFERENCES identities (id),
    session_key      TEXT,
    revision         INTEGER NOT NULL DEFAULT 1
                     CONSTRAINT plan_reviews_revision_check CHECK (revision >= 1),
    created_at       TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT ikigai_now(),
    reviewed_at      TIMESTAMPTZ,
    CONSTRAINT plan_reviews_decision_check
        CHECK ((state = 'pending') = (reviewed_at IS NULL)
               AND (reviewed_at IS NULL) = (reviewed_by_id IS NULL)
               AND (state <> 'pending' OR reviewer_comment IS NULL))
);
CREATE INDEX IF NOT EXISTS plan_reviews_requester_idx ON plan_reviews (requester_id, id);
-- pending_for_session: a session's plans waiting for a decision.
CREATE INDEX IF NOT EXISTS plan_reviews_pending_idx ON plan_reviews (session_key, id)
    WHERE state = 'pending';

UPDATE schema_metadata SET schema_version = 12 WHERE schema_version < 12;
