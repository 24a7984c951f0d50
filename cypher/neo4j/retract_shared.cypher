// Unload, step 2 (after retract_only): take source $source out of up to $limit triples
// that other sources assert too. Run until it returns 0.
MATCH ()-[t:REL]->()
WHERE $source IN coalesce(t.sources, [0])
WITH t
LIMIT $limit
SET t.sources = [x IN coalesce(t.sources, [0]) WHERE x <> $source]
RETURN count(t) AS retracted
