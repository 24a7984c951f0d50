// FalkorDB's score is a cosine DISTANCE (1 - cos); return the cosine similarity.
// $fetch > $k: a vector re-written with a new value leaves a deleted entry in FalkorDB's
// HNSW index that still fills a slot of the top-$fetch; the extra slots absorb them.
CALL db.idx.vector.queryNodes('Entity', 'embedding', $fetch, vecf32($vector))
YIELD node, score
RETURN node.id AS id, node.name AS name, 1.0 - score AS similarity
ORDER BY similarity DESC, id
LIMIT $k
