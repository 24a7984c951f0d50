// $rows: [{h, rel, t}] between existing entities, asserted by source $source (an integer
// >= 1). The triple's `sources` list records every source asserting it (a missing list is
// the `legacy` source 0: triples written before sources were recorded). $source is
// appended only when it is not there yet, so an idempotent reload writes nothing.
// Returns how many rows found both endpoints and how many assertions are new.
UNWIND $rows AS row
MATCH (h:Entity {id: row.h})
MATCH (t:Entity {id: row.t})
MERGE (h)-[r:REL {rel: row.rel}]->(t)
ON CREATE SET r.sources = []
WITH r, coalesce(r.sources, [0]) AS have
WITH r, have, NOT ($source IN have) AS fresh
FOREACH (_ IN CASE WHEN fresh THEN [1] ELSE [] END | SET r.sources = have + $source)
RETURN count(*) AS written, sum(CASE WHEN fresh THEN 1 ELSE 0 END) AS added
