// Export (`talent export --neo4j-import`): the entities whose internal node id is in
// [$lo, $hi) (a "Node By Label and ID Scan": no sort of the whole graph per page).
MATCH (e:Entity)
WHERE ID(e) >= $lo AND ID(e) < $hi
RETURN e.id AS id, e.name AS name, e.name_lc AS name_lc, e.embedding AS embedding
ORDER BY id
