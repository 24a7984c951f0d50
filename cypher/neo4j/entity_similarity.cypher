// Computed in the database: embeddings never leave it. (1 + cos) / 2 -> cos.
UNWIND $ids AS id
MATCH (e:Entity {id: id})
WHERE e.embedding IS NOT NULL
RETURN e.id AS id, 2.0 * vector.similarity.cosine(e.embedding, $vector) - 1.0 AS score
