-- Undo 0038: on Citus, review_iterations and review_issues go back to the coordinator (their
-- rows with them); on both, their primary keys ((id)) and review_iterations' foreign keys to
-- reviews and identities return; this migration's area function of ikigai_distribute() goes.
-- queries/reviews.sql of 0037 held these statements itself.
-- On Citus, this transaction both moves tables and replaces functions: its shard commands run
-- one at a time (as 0036's rollback).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
END
$$;

DROP FUNCTION IF EXISTS ikigai_review_resolve_issue(BIGINT, TEXT, INTEGER);
DROP FUNCTION IF EXISTS ikigai_review_issue(BIGINT);
DROP FUNCTION IF EXISTS ikigai_review_record_iteration(UUID, TEXT, TEXT, TEXT, TEXT, JSONB,
                                                       INTEGER, BIGINT, BIGINT,
                                                       DOUBLE PRECISION, TEXT, JSONB, TEXT,
                                                       TEXT, TEXT, TEXT, TEXT);
DROP FUNCTION IF EXISTS ikigai_review_rows(UUID, INTEGER);

DO $$
DECLARE
    t TEXT;
    distributed BOOLEAN;
BEGIN
    -- review_issues' keys to review_iterations go first (undistribute_table refuses a table
    -- with foreign keys to or from another distributed table); they come back below.
    ALTER TABLE review_issues DROP CONSTRAINT IF EXISTS review_issues_iteration_fkey;
    ALTER TABLE review_issues DROP CONSTRAINT IF EXISTS review_issues_resolved_fkey;
    FOREACH t IN ARRAY ARRAY['review_issues', 'review_iterations'] LOOP
        -- (pg_dist_partition exists only with citus: read it through EXECUTE.)
        IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
            EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1)'
                INTO distributed USING t::regclass;
            IF distributed THEN
                EXECUTE format('SELECT undistribute_table(%L)', t);
            END IF;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = t::regclass AND conname = t || '_pkey'
                     AND cardinality(conkey) = 2) THEN
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t, t || '_pkey');
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (id)', t, t || '_pkey');
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'review_iterations'::regclass
                     AND conname = 'review_iterations_review_id_fkey') THEN
        ALTER TABLE review_iterations ADD CONSTRAINT review_iterations_review_id_fkey
            FOREIGN KEY (review_id) REFERENCES reviews (review_id);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'review_iterations'::regclass
                     AND conname = 'review_iterations_reviewer_id_fkey') THEN
        ALTER TABLE review_iterations ADD CONSTRAINT review_iterations_reviewer_id_fkey
            FOREIGN KEY (reviewer_id) REFERENCES identities (id);
    END IF;
    ALTER TABLE review_issues ADD CONSTRAINT review_issues_iteration_fkey
        FOREIGN KEY (review_id, iteration_num)
        REFERENCES review_iterations (review_id, iteration_num);
    ALTER TABLE review_issues ADD CONSTRAINT review_issues_resolved_fkey
        FOREIGN KEY (review_id, resolved_in_iteration)
        REFERENCES review_iterations (review_id, iteration_num);
END
$$;

-- This migration's area of the placement (ikigai_distribute(), 0033's, stays).
DROP FUNCTION IF EXISTS ikigai_distribute_0038_reviews();

UPDATE schema_metadata SET schema_version = 37 WHERE schema_version = 38;
