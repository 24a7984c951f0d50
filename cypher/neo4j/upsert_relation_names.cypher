// $rows: [{name}] of the relation catalogue without an embedding; an existing one is kept.
UNWIND $rows AS row
MERGE (:Relation {name: row.name})
