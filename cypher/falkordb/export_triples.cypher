// Export: the outgoing :REL edges of the source entities whose internal node id is in
// [$lo, $hi).
MATCH (a:Entity)-[r:REL]->(b:Entity)
WHERE ID(a) >= $lo AND ID(a) < $hi
RETURN a.id AS src, r.rel AS rel, b.id AS dst, r.sources AS sources
ORDER BY src, rel, dst
