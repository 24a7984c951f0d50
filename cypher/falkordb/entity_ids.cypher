// One page of entity ids in id order, keyset-paginated ($after: the last id of the previous
// page, "" first): `talent train planner --self` samples its anchors from them.
// `e.id + ''` keeps FalkorDB off its range index here: the index's string order is not the
// ORDER BY's for accented names ("Joseph" > "José Rivera" there, and below it in ORDER BY),
// so pages through it skipped entities (tests/contract: test_entity_ids_pages_every_id).
MATCH (e:Entity)
WHERE e.id + '' > $after
RETURN e.id AS id
ORDER BY id
LIMIT $limit
