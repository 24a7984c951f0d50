// The neighbours of each node of $ids over relation $rel, direction ignored: at most $limit
// per node, in neighbour-id order (the relation-path planner's walks; `Planner` follows one
// relation of a planned path per call). Rows: (frontier id, neighbour id).
UNWIND $ids AS fid
MATCH (n:Entity {id: fid})
CALL (n) {
  MATCH (n)-[r:REL]-(m:Entity)
  WHERE r.rel = $rel
  WITH DISTINCT m.id AS mid
  ORDER BY mid
  LIMIT $limit
  RETURN mid
}
RETURN fid, mid
