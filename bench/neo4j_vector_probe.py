"""Bench: recall of Neo4j's vector index against exact cosines, by how many candidates the
HNSW search is asked for (`$fetch` in cypher/neo4j/top_entities.cypher), beside the
embedded store's top_entities.

Lucene's HNSW search (Neo4j 5.26) explores as many candidates as it returns, so asking for
k alone misses near neighbours. For a seeded sample of the store's own entities, each
entity's stored vector is the query; recall@k counts returned ids whose exact cosine
reaches the exact k-th best (ties count as found). Neo4j and the embedded store hold the
same KG (the embedded store's vectors are the reference).

    python bench/neo4j_vector_probe.py --embedded-dir .talent/b/webqsp --sample 200 \
        -o bench/results/neo4j_vector_fetch.json
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np  # noqa: E402
from benchio import load_average, write_json_atomic  # noqa: E402

from talent_core.config import Settings  # noqa: E402
from talent_core.store.falkordb import FalkorDBStore  # noqa: E402
from talent_core.store.neo4j import Neo4jStore  # noqa: E402

QUERY = (  # the statement of cypher/neo4j/top_entities.cypher, $fetch free
    "CALL db.index.vector.queryNodes('entity_embedding', $fetch, $vector) YIELD node, score "
    "RETURN node.id, 2.0 * score - 1.0 AS s ORDER BY s DESC, node.id LIMIT $k"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embedded-dir", type=Path, required=True)
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    s = Settings(store="embedded", data_dir=args.embedded_dir)
    emb = FalkorDBStore.from_settings(s)
    neo = Neo4jStore.from_settings(s.model_copy(update={"store": "neo4j"}))
    ids = [r[0] for r in neo._run("MATCH (x:Entity) RETURN x.id")]
    sample = random.Random(0).sample(ids, min(args.sample, len(ids)))
    vecs = emb.entity_vectors(ids)
    keys = list(vecs)
    pos = {k: i for i, k in enumerate(keys)}
    m = np.stack([vecs[k] for k in keys])
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    out: dict = {
        "command": "python bench/neo4j_vector_probe.py " + " ".join(sys.argv[1:]),
        "entities": len(ids),
        "sample": len(sample),
        "load_average_before": load_average(),
    }

    def found(got: list[str], cos: np.ndarray, kth: float) -> int:
        return sum(cos[pos[g]] >= kth - 1e-5 for g in got)

    for k in (1, 10):
        exact = {}
        for e in sample:
            cos = m @ (vecs[e] / np.linalg.norm(vecs[e]))
            exact[e] = (cos, float(np.sort(cos)[-k]))
        for fetch in (k, 2 * k + 10, 50, 100, 200):
            t, hit = time.perf_counter(), 0
            for e in sample:
                rows = neo._run(QUERY, {"fetch": fetch, "k": k, "vector": vecs[e].tolist()})
                hit += found([r[0] for r in rows], *exact[e])
            out[f"k{k}_neo4j_fetch{fetch}"] = {
                "recall": round(hit / (k * len(sample)), 4),
                "ms_per_query": round((time.perf_counter() - t) / len(sample) * 1000, 2),
            }
        t, hit = time.perf_counter(), 0
        for e in sample:
            hit += found([h.entity.id for h in emb.top_entities(vecs[e], k)], *exact[e])
        out[f"k{k}_embedded"] = {
            "recall": round(hit / (k * len(sample)), 4),
            "ms_per_query": round((time.perf_counter() - t) / len(sample) * 1000, 2),
        }
    out["load_average_after"] = load_average()
    write_json_atomic(args.out, out)
    print({k: v for k, v in out.items() if k.startswith("k")})
    emb.close()
    neo.close()


if __name__ == "__main__":
    main()
