// Live entities (from the label's counter, not a scan): a vector query that returned fewer
// than k of them asks again with a larger over-fetch (store/falkordb.py, `_top`).
MATCH (e:Entity)
RETURN count(e) AS n
