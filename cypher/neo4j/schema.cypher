// Constraints and indexes of the data model (talent_core/store/base.py). Idempotent.
// $dimension: the embedding model's dimension (both vector indexes, cosine). Quantization off:
// Neo4j 5.26 quantizes vector indexes by default, which moves scores by ~0.01 and can tie or
// swap neighbours (measured on 5.26.30: the opposite of the query scored like an orthogonal
// vector); the stores return exact cosines, as the embedded store's float32 HNSW does.
CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (e:Entity) REQUIRE e.id IS UNIQUE;
CREATE CONSTRAINT relation_name IF NOT EXISTS FOR (r:Relation) REQUIRE r.name IS UNIQUE;
CREATE CONSTRAINT source_id IF NOT EXISTS FOR (s:Source) REQUIRE s.id IS UNIQUE;
CREATE INDEX entity_name_lc IF NOT EXISTS FOR (e:Entity) ON (e.name_lc);
CREATE FULLTEXT INDEX entity_name_fulltext IF NOT EXISTS FOR (e:Entity) ON EACH [e.name];
CREATE VECTOR INDEX entity_embedding IF NOT EXISTS
FOR (e:Entity) ON (e.embedding)
OPTIONS {indexConfig: {
  `vector.dimensions`: toInteger($dimension),
  `vector.similarity_function`: 'cosine',
  `vector.quantization.enabled`: false
}};
CREATE VECTOR INDEX relation_embedding IF NOT EXISTS
FOR (r:Relation) ON (r.embedding)
OPTIONS {indexConfig: {
  `vector.dimensions`: toInteger($dimension),
  `vector.similarity_function`: 'cosine',
  `vector.quantization.enabled`: false
}};
