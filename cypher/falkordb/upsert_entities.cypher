// $rows: [{id, name, name_lc, embedding}]. MERGE on the unique id: re-running is a no-op.
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
SET e.name = row.name, e.name_lc = row.name_lc, e.embedding = vecf32(row.embedding)
