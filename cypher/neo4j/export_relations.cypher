// Export: one page of the relation catalogue in name order ($after: the last name of the
// previous page, "" first).
MATCH (r:Relation)
WHERE r.name > $after
RETURN r.name AS name, r.embedding AS embedding
ORDER BY name
LIMIT $limit
