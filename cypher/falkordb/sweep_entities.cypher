// Unload / replace: delete up to $limit entities left without any triple (their vectors go
// with them). Run until it returns 0. FalkorDB has no EXISTS {}: a pattern predicate.
MATCH (e:Entity)
WHERE NOT (e)-[:REL]-()
WITH e
LIMIT $limit
DELETE e
RETURN count(*) AS deleted
