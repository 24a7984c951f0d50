// $query: a RediSearch OR-query of plain words (talent_core.text.redisearch_query).
CALL db.idx.fulltext.queryNodes('Entity', $query)
YIELD node, score
RETURN node.id AS id, node.name AS name, score, size(node.name) AS length
ORDER BY score DESC, length, id
LIMIT $k
