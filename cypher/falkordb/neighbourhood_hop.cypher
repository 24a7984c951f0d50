// One hop of the undirected expansion from the frontier $ids; see cypher/neo4j (the $scan
// hub cap is read before the key-order top $limit). FalkorDB imports variables into
// CALL {} with WITH.
UNWIND $ids AS fid
MATCH (n:Entity {id: fid})
CALL {
  WITH n
  MATCH (n)-[r:REL]-(m:Entity)
  WITH n, r, m
  LIMIT $scan
  WITH n, r, m, startNode(r) = n AS out
  ORDER BY m.id, r.rel, out
  LIMIT $limit
  RETURN out, r.rel AS rel, m.id AS mid, m.name AS mname
}
RETURN n.id AS fid, out, rel, mid, mname
