// The triples between two of $ids whose relation is one of $rels, in their own direction
// (an evidence path's hops: `follow` ignores direction). Rows: (src id, rel, dst id).
UNWIND $ids AS sid
MATCH (a:Entity {id: sid})-[r:REL]->(b:Entity)
WHERE b.id IN $ids AND r.rel IN $rels
RETURN DISTINCT a.id AS src, r.rel AS rel, b.id AS dst
ORDER BY src, rel, dst
