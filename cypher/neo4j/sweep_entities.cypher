// Unload / replace: delete up to $limit entities left without any triple (their vectors go
// with them). Run until it returns 0.
MATCH (e:Entity)
WHERE NOT EXISTS { (e)-[:REL]-() }
WITH e
LIMIT $limit
DELETE e
RETURN count(*) AS deleted
