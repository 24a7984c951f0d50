// Export: the outgoing :REL edges of one page of source entities in id order ($after: the
// last source id of the previous page, "" first). Every source of the page gives at least
// one row (rel and dst null when it has no outgoing edge) so the caller can advance $after.
MATCH (a:Entity)
WHERE a.id > $after
WITH a
ORDER BY a.id
LIMIT $limit
OPTIONAL MATCH (a)-[r:REL]->(b:Entity)
RETURN a.id AS src, r.rel AS rel, b.id AS dst, r.sources AS sources
