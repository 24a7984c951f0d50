// FalkorDB's score is a cosine DISTANCE (1 - cos); return the cosine similarity.
CALL db.idx.vector.queryNodes('Relation', 'embedding', $k, vecf32($vector))
YIELD node, score
RETURN node.name AS name, 1.0 - score AS similarity
ORDER BY similarity DESC, name
