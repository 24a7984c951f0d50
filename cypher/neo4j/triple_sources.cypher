// The sources asserting each of the triples $triples ([head id, relation, tail id] lists):
// what the Ask page says about an answer's evidence. A legacy triple has no `sources` list.
UNWIND $triples AS x
MATCH (a:Entity {id: x[0]})-[t:REL]->(b:Entity {id: x[2]})
WHERE t.rel = x[1]
RETURN a.id AS h, t.rel AS rel, b.id AS t, coalesce(t.sources, [0]) AS sources
