// FalkorDB's score is a cosine DISTANCE (1 - cos); return the cosine similarity.
// $fetch > $k: see top_entities.cypher.
CALL db.idx.vector.queryNodes('Relation', 'embedding', $fetch, vecf32($vector))
YIELD node, score
RETURN node.name AS name, 1.0 - score AS similarity
ORDER BY similarity DESC, name
LIMIT $k
