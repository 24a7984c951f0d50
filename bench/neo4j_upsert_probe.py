"""Bench: Neo4jStore.upsert_entities of 5,000 random 384-d unit vectors into the cleared
Neo4j database (the `make neo4j-up` server), with and without the vector index, beside
the same MERGE with the vectors sent but not stored: where a Neo4j load's entity time goes
(run once with and once without `neo4j-rust-ext` installed: the driver's packstream).

    python bench/neo4j_upsert_probe.py   # prints seconds and entities/s per variant
"""

from __future__ import annotations

import time

import numpy as np

from talent_core.config import Settings
from talent_core.store.neo4j import Neo4jStore

N = 5000
MERGE_NAMES = ("UNWIND $rows AS row MERGE (e:Entity {id: row.id}) "
               "SET e.name = row.name, e.name_lc = row.name_lc")  # fmt: skip


def main() -> None:
    store = Neo4jStore.from_settings(Settings(store="neo4j"))
    v = np.random.default_rng(0).standard_normal((N, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    rows = [(f"e{i}", f"name {i}", v[i]) for i in range(N)]

    def run(label: str, drop_vector_index: bool = False, names_only: bool = False) -> None:
        store.clear()
        store.ensure_schema(384)
        if drop_vector_index:
            store._run("DROP INDEX entity_embedding", write=True)
        t = time.perf_counter()
        if names_only:
            for i in range(0, N, 1000):
                store._run(MERGE_NAMES, {"rows": [
                    {"id": r[0], "name": r[1], "name_lc": r[1], "embedding": r[2].tolist()}
                    for r in rows[i : i + 1000]]}, write=True)  # fmt: skip
        else:
            store.upsert_entities(rows)
        dt = time.perf_counter() - t
        print(f"{label}: {dt:.2f} s, {N / dt:.0f} entities/s", flush=True)

    run("upsert_entities (setNodeVectorProperty, vector index)")
    run("upsert_entities, no vector index", drop_vector_index=True)
    run("MERGE names only, vectors sent but not stored", names_only=True)
    store.clear()
    store.close()


if __name__ == "__main__":
    main()
