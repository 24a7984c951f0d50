// The values of relation $rel at each node of $ids, in the triple's own direction (node
// -[rel]-> value: a film's release year, not the films of a year that is also a title):
// rows (node id, value id, value name); what a filter, a superlative or a comparison
// reads (`operators`).
UNWIND $ids AS fid
MATCH (n:Entity {id: fid})-[r:REL]->(v:Entity)
WHERE r.rel = $rel
RETURN DISTINCT n.id AS id, v.id AS vid, v.name AS value
