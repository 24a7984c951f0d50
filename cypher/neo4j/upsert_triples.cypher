// $rows: [{h, rel, t}] between existing entities. One relationship type; the relation text
// is a property, so this stays one parameterised statement for any number of relations.
// Returns how many rows found both endpoints (the store raises when some did not).
UNWIND $rows AS row
MATCH (h:Entity {id: row.h})
MATCH (t:Entity {id: row.t})
MERGE (h)-[:REL {rel: row.rel}]->(t)
RETURN count(*) AS written
