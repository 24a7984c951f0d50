// Unload / replace: delete those of the entities $ids left without any triple (their
// vectors go with them): the endpoints of the triples the run deleted.
UNWIND $ids AS id
MATCH (e:Entity {id: id})
WHERE NOT EXISTS { (e)-[:REL]-() }
DELETE e
RETURN count(*) AS deleted
