// Export (`talent export --neo4j-import`): one page of entities in id order, keyset-paginated
// ($after: the last id of the previous page, "" first; the uniqueness constraint's index
// serves the range and the order).
MATCH (e:Entity)
WHERE e.id > $after
RETURN e.id AS id, e.name AS name, e.name_lc AS name_lc, e.embedding AS embedding
ORDER BY id
LIMIT $limit
