// Computed in the database: embeddings never leave it. (1 + cos) / 2 -> cos.
UNWIND $names AS name
MATCH (r:Relation {name: name})
WHERE r.embedding IS NOT NULL
RETURN r.name AS name, 2.0 * vector.similarity.cosine(r.embedding, $vector) - 1.0 AS score
