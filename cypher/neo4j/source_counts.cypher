// Per source id: the triples it asserts and those only it asserts (one scan of the
// triples; a triple without a `sources` list belongs to the legacy source 0).
MATCH ()-[t:REL]->()
WITH coalesce(t.sources, [0]) AS s
UNWIND s AS source
RETURN source, count(*) AS triples, sum(CASE WHEN size(s) = 1 THEN 1 ELSE 0 END) AS only
