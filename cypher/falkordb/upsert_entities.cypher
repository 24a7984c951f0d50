// $rows: [{id, name, name_lc, embedding}]. MERGE on the indexed id: re-running is a no-op.
// The embedding is written only when new or changed: FalkorDB 4.16 keeps the old entry of
// a re-written vector in its HNSW index as a deleted node that still takes a slot of the
// top-k (see top_entities.cypher), so an idempotent re-load must not touch the vectors.
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
SET e.name = row.name, e.name_lc = row.name_lc
WITH e, vecf32(row.embedding) AS v
FOREACH (_ IN CASE WHEN e.embedding IS NULL OR vec.euclideanDistance(e.embedding, v) <> 0
                   THEN [1] ELSE [] END |
  SET e.embedding = v)
