// Neo4j's cosine score is (1 + cos) / 2; return the cosine itself.
// $fetch >= $k (Neo4jStore: at least 50): the HNSW search explores as many candidates as
// it is asked to return, so asking for $k alone misses near neighbours that a wider search
// finds; the best $k of $fetch are kept (bench/README.md, "Neo4j for real").
CALL db.index.vector.queryNodes('entity_embedding', $fetch, $vector)
YIELD node, score
RETURN node.id AS id, node.name AS name, 2.0 * score - 1.0 AS score
ORDER BY score DESC, id
LIMIT $k
