// The distinct relation types on the edges of the nodes $ids (either direction): which
// relation paths can start there (the planner). See cypher/neo4j.
UNWIND $ids AS fid
MATCH (n:Entity {id: fid})-[r:REL]-(:Entity)
RETURN DISTINCT r.rel AS rel
