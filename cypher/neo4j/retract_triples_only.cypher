// Replace: delete those of $rows [{h, rel, t}] that source $source alone asserts.
UNWIND $rows AS row
MATCH (:Entity {id: row.h})-[t:REL {rel: row.rel}]->(:Entity {id: row.t})
WITH t
WHERE coalesce(t.sources, [0]) = [$source]
DELETE t
RETURN count(*) AS deleted
