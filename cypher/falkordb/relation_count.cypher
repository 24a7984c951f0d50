// Live catalogue relations (see entity_count).
MATCH (r:Relation)
RETURN count(r) AS n
