// $query: a Lucene query built from escaped words (talent_core.text.lucene_query).
CALL db.index.fulltext.queryNodes('entity_name_fulltext', $query, {limit: $k})
YIELD node, score
RETURN node.id AS id, node.name AS name, score, size(node.name) AS length
ORDER BY score DESC, length, id
LIMIT $k
