// $rows: [{id, embedding}]: the embedding of entities stored without one (`talent vectors`).
// MATCH, not MERGE: an entity an unload deleted meanwhile is not brought back; one that has
// its embedding already keeps it (a re-written vector would leave a stale HNSW entry, see
// upsert_entities). Returns how many were set.
UNWIND $rows AS row
MATCH (e:Entity {id: row.id})
WHERE e.embedding IS NULL
SET e.embedding = vecf32(row.embedding)
RETURN count(e) AS n
