// See cypher/neo4j: FalkorDB imports variables into CALL {} with WITH.
UNWIND $ids AS fid
MATCH (n:Entity {id: fid})
CALL {
  WITH n
  MATCH (n)-[r:REL]-(m:Entity)
  WHERE r.rel = $rel
  WITH DISTINCT m.id AS mid
  ORDER BY mid
  LIMIT $limit
  RETURN mid
}
RETURN n.id AS fid, mid
