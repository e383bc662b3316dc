-- Undo 0031: ikigai_clock() goes (the lease statements of 0.8.0 start a grant at ikigai_now()).
DROP FUNCTION IF EXISTS ikigai_clock();
UPDATE schema_metadata SET schema_version = 30 WHERE schema_version = 31;
