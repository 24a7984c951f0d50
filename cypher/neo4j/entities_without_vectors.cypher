// The first $limit entities stored without their embedding (`talent load --vectors later`),
// in id order: what `talent vectors` embeds next. No keyset cursor: the fill's own writes
// move it on (and FalkorDB's string `>` does not follow its ORDER BY for accented names).
MATCH (e:Entity)
WHERE e.embedding IS NULL
RETURN e.id AS id, e.name AS name
ORDER BY id
LIMIT $limit
