// One hop of the undirected expansion from the frontier $ids. Per frontier node at most
// $limit edges (the caller passes fanout + 1 to detect truncation), chosen by a stable key
// (neighbour id, relation, direction) so the choice does not depend on load order; the
// top-k runs inside the database and only $limit rows per node leave it.
UNWIND $ids AS fid
MATCH (n:Entity {id: fid})
CALL (n) {
  MATCH (n)-[r:REL]-(m:Entity)
  WITH n, r, m, startNode(r) = n AS out
  ORDER BY m.id, r.rel, out
  LIMIT $limit
  RETURN out, r.rel AS rel, m.id AS mid, m.name AS mname
}
RETURN fid, out, rel, mid, mname
