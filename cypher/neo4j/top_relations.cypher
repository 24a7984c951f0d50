// Neo4j's cosine score is (1 + cos) / 2; return the cosine itself.
// $fetch > $k: a wider HNSW search than $k (see top_entities.cypher); the best $k are kept.
CALL db.index.vector.queryNodes('relation_embedding', $fetch, $vector)
YIELD node, score
RETURN node.name AS name, 2.0 * score - 1.0 AS score
ORDER BY score DESC, name
LIMIT $k
