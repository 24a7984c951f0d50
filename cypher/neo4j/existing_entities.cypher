UNWIND $ids AS id
MATCH (e:Entity {id: id})
WHERE e.embedding IS NOT NULL
RETURN e.id AS id
