// $rows: [{name, embedding}] of the relation catalogue. MERGE on the unique name.
UNWIND $rows AS row
MERGE (r:Relation {name: row.name})
WITH r, row
CALL db.create.setNodeVectorProperty(r, 'embedding', row.embedding)
