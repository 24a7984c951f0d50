// The highest Source id (null when there is none): a new source takes the next one.
MATCH (s:Source)
RETURN max(s.id) AS id
