// Every recorded source (the Source nodes; `legacy` has none), by id.
MATCH (s:Source)
RETURN s.id AS id, s.name AS name, s.sha256 AS sha256, s.format AS format,
       s.created AS created, s.state AS state, s.rows_read AS rows_read,
       s.loaded AS loaded, s.rejected AS rejected
ORDER BY id
