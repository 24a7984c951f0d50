// Unload / replace: drop the entity and relation vector indexes so that the schema builds
// them again from the live nodes. FalkorDB 4.16 keeps a deleted node's entry in its HNSW
// index until the server restarts, and a query's top-$fetch can then hold only such entries
// (tests/sources). The store ignores "no such index" (a rerun after a kill between the drop
// and the rebuild).
DROP VECTOR INDEX FOR (e:Entity) ON (e.embedding);
DROP VECTOR INDEX FOR (r:Relation) ON (r.embedding)
