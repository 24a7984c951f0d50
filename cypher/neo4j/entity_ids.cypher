// One page of entity ids in id order, keyset-paginated ($after: the last id of the previous
// page, "" first): `talent train planner --self` samples its anchors from them.
MATCH (e:Entity)
WHERE e.id > $after
RETURN e.id AS id
ORDER BY id
LIMIT $limit
