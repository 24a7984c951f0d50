UNWIND $names AS name
MATCH (r:Relation {name: name})
WHERE r.embedding IS NOT NULL
RETURN r.name AS name
