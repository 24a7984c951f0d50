// Dimension of each existing vector index, keyed by label (to refuse a model mismatch).
CALL db.indexes() YIELD label, types, options
WHERE 'VECTOR' IN types.embedding
RETURN label, options.embedding.dimension AS dimension
