// Computed in the database: embeddings never leave it. Distance -> similarity.
UNWIND $names AS name
MATCH (r:Relation {name: name})
WHERE r.embedding IS NOT NULL
RETURN r.name AS name, 1.0 - vec.cosineDistance(r.embedding, vecf32($vector)) AS similarity
