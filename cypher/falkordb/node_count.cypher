// Bulk loading: every node of the graph (entities and catalogue relations); answered from
// the graph's counters, not by a scan.
MATCH (n)
RETURN count(n) AS n
