// Unload / replace: delete the catalogue relations $names (no triple uses them).
UNWIND $names AS n
MATCH (r:Relation {name: n})
DELETE r
RETURN count(*) AS deleted
