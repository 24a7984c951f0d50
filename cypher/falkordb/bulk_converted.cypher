// Bulk loading: how many nodes with internal ids in [$lo, $hi) hold their vecf32 embedding
// (no `_v` list left). bulk_vectors converted fewer than the batch's nodes when another
// process finished the batch first (its loader ran bulk_pending / bulk_vectors while this
// loader's conversion was queued); this tells that case from a wrong id range.
MATCH (n)
WHERE ID(n) >= $lo AND ID(n) < $hi AND n.embedding IS NOT NULL AND n._v IS NULL
RETURN count(n) AS converted
