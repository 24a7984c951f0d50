// Bulk loading: the node id ranges [lo, hi) of GRAPH.BULK batches whose vectors were not
// converted yet (the loader died between the two commands); bulk_vectors finishes them.
MATCH ()-[p:BULK_PENDING]->()
RETURN p.lo AS lo, p.hi AS hi
ORDER BY lo
