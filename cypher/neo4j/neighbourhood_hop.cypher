// One hop of the undirected expansion from the frontier $ids. Per frontier node at most
// $limit edges (the caller passes fanout + 1 to detect truncation), chosen by a stable key
// (neighbour id, relation, direction) so the choice does not depend on load order; the
// top-k runs inside the database and only $limit rows per node leave it.
// Hubs: at most $scan (>= $limit) incident edges per node are read, in the store's own
// traversal order, BEFORE the key order applies, so a node with 77k edges costs $scan rows,
// not a sort of all 77k. A node of degree <= $scan gets the exact key-order top $limit;
// a larger hub the key-order top $limit of its first $scan edges (the same on every call
// against the same store; it is truncated either way).
UNWIND $ids AS fid
MATCH (n:Entity {id: fid})
CALL (n) {
  MATCH (n)-[r:REL]-(m:Entity)
  WITH r, m
  LIMIT $scan
  WITH r, m, startNode(r) = n AS out
  ORDER BY m.id, r.rel, out
  LIMIT $limit
  RETURN out, r.rel AS rel, m.id AS mid, m.name AS mname
}
RETURN fid, out, rel, mid, mname
