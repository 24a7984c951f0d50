// The last step of an unload: the Source record goes.
MATCH (s:Source {id: $id})
DELETE s
RETURN count(*) AS deleted
