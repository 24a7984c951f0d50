// $rows: [{id, name, name_lc}] without an embedding; an existing embedding is kept.
UNWIND $rows AS row
MERGE (e:Entity {id: row.id})
SET e.name = row.name, e.name_lc = row.name_lc
