// The stored embeddings of the given entities (the learned retrievers' features).
UNWIND $ids AS id
MATCH (e:Entity {id: id})
WHERE e.embedding IS NOT NULL
RETURN e.id AS id, e.embedding AS embedding
