// One entity with a stored embedding (its vector gives the dimension when the vector
// index is missing: a rebuild killed after dropping it).
MATCH (e:Entity)
WHERE e.embedding IS NOT NULL
RETURN e.id AS id
LIMIT 1
