// Neo4j's cosine score is (1 + cos) / 2; return the cosine itself.
CALL db.index.vector.queryNodes('relation_embedding', $k, $vector)
YIELD node, score
RETURN node.name AS name, 2.0 * score - 1.0 AS score
ORDER BY score DESC, name
