-- Undo 0043: its area function of ikigai_distribute() goes. The copies it removed from the
-- coordinator are not restored (no statement read them: the rows are on the shards).
DROP FUNCTION IF EXISTS ikigai_distribute_0043_local_copies();

UPDATE schema_metadata SET schema_version = 42 WHERE schema_version = 43;
