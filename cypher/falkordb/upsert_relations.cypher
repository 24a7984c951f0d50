// $rows: [{name, embedding}] of the relation catalogue. MERGE on the unique name.
UNWIND $rows AS row
MERGE (r:Relation {name: row.name})
SET r.embedding = vecf32(row.embedding)
