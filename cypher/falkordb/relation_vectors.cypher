// The stored embeddings of the given catalogue relations (the learned retrievers' features).
UNWIND $names AS name
MATCH (r:Relation {name: name})
WHERE r.embedding IS NOT NULL
RETURN r.name AS name, r.embedding AS embedding
