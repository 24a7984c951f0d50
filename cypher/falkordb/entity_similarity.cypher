// Computed in the database: embeddings never leave it. Distance -> similarity.
UNWIND $ids AS id
MATCH (e:Entity {id: id})
WHERE e.embedding IS NOT NULL
RETURN e.id AS id, 1.0 - vec.cosineDistance(e.embedding, vecf32($vector)) AS similarity
