// Unload, step 1: delete up to $limit triples that source $source alone asserts (and any
// triple no source asserts); their endpoints come back (the entity sweep's candidates).
// Run until it returns no row.
MATCH (a:Entity)-[t:REL]->(b:Entity)
WHERE coalesce(t.sources, [0]) = [$source] OR t.sources = []
WITH a, t, b
LIMIT $limit
DELETE t
RETURN a.id AS h, b.id AS t
