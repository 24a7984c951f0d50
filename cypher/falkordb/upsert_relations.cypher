// $rows: [{name, embedding}] of the relation catalogue. MERGE on the indexed name. The
// embedding is written only when new or changed (see upsert_entities.cypher).
UNWIND $rows AS row
MERGE (r:Relation {name: row.name})
WITH r, vecf32(row.embedding) AS v
FOREACH (_ IN CASE WHEN r.embedding IS NULL OR vec.euclideanDistance(r.embedding, v) <> 0
                   THEN [1] ELSE [] END |
  SET r.embedding = v)
