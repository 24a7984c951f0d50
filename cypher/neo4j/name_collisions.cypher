// Names (normalised: lowercase, collapsed spaces) that several entities share, most
// shared first: a name lookup of one of them is ambiguous. $ids: ids listed per name.
MATCH (e:Entity)
WITH e.name_lc AS key, count(*) AS n, collect(e.id) AS ids, collect(e.name) AS names
WHERE n > 1
RETURN names[0] AS name, n AS count, ids[..$ids] AS ids
ORDER BY count DESC, key
