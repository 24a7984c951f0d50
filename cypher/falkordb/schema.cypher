// FalkorDB has no IF NOT EXISTS: the store runs each statement and ignores only
// "already indexed" errors.
// No UNIQUE constraints here, on purpose: FalkorDB 4.16's constraint check crashes the
// server (SIGSEGV in EnforceUniqueEntity) when a MERGE creates a node whose key is empty or
// has leading/trailing whitespace. Uniqueness holds without it: MERGE on the indexed key,
// and the store serialises every write with a flock in the data dir (FalkorDB alone lets two
// concurrent MERGEs of one relationship both create it); tested with concurrent writers.
// HNSW: M 12, efConstruction 28, efRuntime 200. FalkorDB does not persist HNSW: it rebuilds
// it at every server start, so its build cost is paid at each start (and per load batch).
// Against the earlier M 16 / efConstruction 64 / efRuntime 100, MetaQA (43k MiniLM vectors),
// 2 cores: start 8.8 -> 4.5-5.1 s, bulk-load vector work 8.5 -> 4.5 s; stored-vector
// self-match in the top 10 1.000 -> 0.999, bench_vector_sanity 99.9 % both, retrieval Hit
// unchanged; a query ~1 ms either way (bench/hnsw_params_probe.py ->
// bench/results/hnsw_params.json). A store keeps the settings it was loaded with.
CREATE INDEX FOR (e:Entity) ON (e.id);
CREATE INDEX FOR (r:Relation) ON (r.name);
CREATE INDEX FOR (e:Entity) ON (e.name_lc);
CREATE FULLTEXT INDEX FOR (e:Entity) ON (e.name);
CREATE VECTOR INDEX FOR (e:Entity) ON (e.embedding)
OPTIONS {dimension: $dimension, similarityFunction: 'cosine', M: 12, efConstruction: 28, efRuntime: 200};
CREATE VECTOR INDEX FOR (r:Relation) ON (r.embedding)
OPTIONS {dimension: $dimension, similarityFunction: 'cosine', M: 12, efConstruction: 28, efRuntime: 200};
