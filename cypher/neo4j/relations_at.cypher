// The distinct relation types on the edges of the nodes $ids (either direction): which
// relation paths can start there (the relation-path planner: a hub's capped expansion may
// not show them all). Rows: (relation name).
UNWIND $ids AS fid
MATCH (n:Entity {id: fid})-[r:REL]-(:Entity)
RETURN DISTINCT r.rel AS rel
