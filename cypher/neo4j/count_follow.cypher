// How many distinct nodes the nodes of $ids reach over relation $rel, direction ignored,
// those of $exclude left out: the last hop of a counted path (`operators`), counted in the
// store without returning a node. (The WITH keeps FalkorDB from reading `m.id IN $exclude`
// as an index scan over every entity: 450 ms -> 1 ms on the MetaQA KB.)
UNWIND $ids AS fid
MATCH (n:Entity {id: fid})
WITH n
MATCH (n)-[r:REL]-(m:Entity)
WHERE r.rel = $rel AND NOT m.id IN $exclude
WITH DISTINCT m
RETURN count(m) AS n
