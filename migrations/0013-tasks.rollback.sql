-- Undo 0013: task lists, tasks and their dependencies go (with their rows).
DROP VIEW IF EXISTS task_view;
DROP TABLE IF EXISTS task_deps;
DROP TABLE IF EXISTS tasks;
DROP TABLE IF EXISTS task_lists;
UPDATE schema_metadata SET schema_version = 12 WHERE schema_version = 13;
