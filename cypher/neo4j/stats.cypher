// Four counts, one statement each: entities, entities with an embedding, relations, triples.
MATCH (e:Entity) RETURN count(e) AS n;
MATCH (e:Entity) WHERE e.embedding IS NOT NULL RETURN count(e) AS n;
MATCH (r:Relation) RETURN count(r) AS n;
MATCH ()-[t:REL]->() RETURN count(t) AS n;
