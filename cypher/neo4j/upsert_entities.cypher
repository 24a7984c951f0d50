// $rows: [{id, name, name_lc, embedding}]. MERGE on the unique id: re-running is a no-op.
// setNodeVectorProperty stores the list as a float32 vector (half the size of SET).
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
SET e.name = row.name, e.name_lc = row.name_lc
WITH e, row
CALL db.create.setNodeVectorProperty(e, 'embedding', row.embedding)
