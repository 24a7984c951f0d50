// Replace: every triple source $source asserts (a legacy triple has no `sources` list).
MATCH (a:Entity)-[t:REL]->(b:Entity)
WHERE $source IN coalesce(t.sources, [0])
RETURN a.id AS h, t.rel AS rel, b.id AS t
