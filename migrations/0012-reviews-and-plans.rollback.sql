-- Undo 0012: reviews, their iterations and issues, and plan reviews go (with their rows). The
-- mail and activities they wrote stay: they belong to mail (0007) and the feed (0011).
DROP TABLE IF EXISTS plan_reviews;
DROP TABLE IF EXISTS review_issues;
DROP TABLE IF EXISTS review_iterations;
DROP TABLE IF EXISTS reviews;
UPDATE schema_metadata SET schema_version = 11 WHERE schema_version = 12;
