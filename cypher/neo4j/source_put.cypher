// Create or update the Source record $id (idempotent).
MERGE (s:Source {id: $id})
SET s.name = $name, s.sha256 = $sha256, s.format = $format, s.created = $created,
    s.state = $state, s.rows_read = $rows_read, s.loaded = $loaded, s.rejected = $rejected
RETURN s.id AS id
