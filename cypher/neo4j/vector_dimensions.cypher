// Dimension of each existing vector index, keyed by label (to refuse a model mismatch).
SHOW VECTOR INDEXES YIELD name, labelsOrTypes, options
WHERE name IN ['entity_embedding', 'relation_embedding']
RETURN labelsOrTypes[0] AS label, options.indexConfig['vector.dimensions'] AS dimension
