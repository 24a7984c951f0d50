// $query: a RediSearch AND-query of fuzzy words, `%w%` / `%%w%%` (talent_core.text
// .redisearch_fuzzy_query). Every fuzzy hit scores alike: shorter names first, then id.
CALL db.idx.fulltext.queryNodes('Entity', $query)
YIELD node, score
RETURN node.id AS id, node.name AS name, score, size(node.name) AS length
ORDER BY score DESC, length, id
LIMIT $k
