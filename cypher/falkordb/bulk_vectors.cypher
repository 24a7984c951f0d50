// Bulk loading (talent_core/store/falkordb_bulk.py): GRAPH.BULK has no vector type, so a
// batch's new nodes arrive with their embedding as a list of doubles in `_v`. This turns
// the nodes with internal ids in [$lo, $hi) into vecf32 embeddings (FalkorDB adds them to
// the HNSW index here), drops `_v` and deletes the batch's BULK_PENDING marker edge (a
// self-loop on node $lo), all in one statement. Returns how many nodes it converted.
MATCH (n)
WHERE ID(n) >= $lo AND ID(n) < $hi AND n._v IS NOT NULL
SET n.embedding = vecf32(n._v), n._v = NULL
WITH count(n) AS converted
MATCH (a)
WHERE ID(a) = $lo
OPTIONAL MATCH (a)-[p:BULK_PENDING]->(a)
DELETE p
RETURN converted
