// Every name of the relation catalogue.
MATCH (r:Relation)
RETURN r.name AS name
