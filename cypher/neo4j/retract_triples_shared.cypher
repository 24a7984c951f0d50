// Replace: take source $source out of those of $rows [{h, rel, t}] that other sources
// assert too (run after retract_triples_only).
UNWIND $rows AS row
MATCH (:Entity {id: row.h})-[t:REL {rel: row.rel}]->(:Entity {id: row.t})
WITH t
WHERE $source IN coalesce(t.sources, [0])
SET t.sources = [x IN coalesce(t.sources, [0]) WHERE x <> $source]
RETURN count(t) AS retracted
