// $query: a Lucene query of required fuzzy words, `+w~1` / `+w~2`
// (talent_core.text.lucene_fuzzy_query).
CALL db.index.fulltext.queryNodes('entity_name_fulltext', $query, {limit: $k})
YIELD node, score
RETURN node.id AS id, node.name AS name, score, size(node.name) AS length
ORDER BY score DESC, length, id
LIMIT $k
