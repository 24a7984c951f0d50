// Export: the catalogue relations whose internal node id is in [$lo, $hi).
MATCH (r:Relation)
WHERE ID(r) >= $lo AND ID(r) < $hi
RETURN r.name AS name, r.embedding AS embedding
ORDER BY name
