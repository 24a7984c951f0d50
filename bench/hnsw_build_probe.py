"""Probe: is building FalkorDB's HNSW vector index after the vectors are written faster
than updating it batch by batch (as the bulk path does)? N random 384-d vectors (default
43,000, MetaQA's entity count) into a throwaway embedded server, both ways.

    python bench/hnsw_build_probe.py [N]

Measured 2026-12-01 (2 cores, quiet): index first 44.3 s; index after: writes 21.5 s, then
24.5 s until the index is OPERATIONAL (46 s): no gain, so the bulk path keeps per-batch
updates (queries work as soon as a load returns).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from talent_core.store.falkordb_server import EmbeddedServer

INDEX = ("CREATE VECTOR INDEX FOR (e:E) ON (e.embedding) OPTIONS {dimension: 384, "
         "similarityFunction: 'cosine', M: 16, efConstruction: 64, efRuntime: 100}")  # fmt: skip
TOPK = ("CALL db.idx.vector.queryNodes('E', 'embedding', 5, vecf32($v)) "
        "YIELD node, score RETURN node.id")  # fmt: skip


def fill(g, vecs: np.ndarray, index_first: bool) -> dict:
    if index_first:
        g.query(INDEX)
    t = time.perf_counter()
    for i in range(0, len(vecs), 5000):
        rows = [{"id": j, "v": vecs[j].tolist()} for j in range(i, min(len(vecs), i + 5000))]
        g.query("UNWIND $rows AS r CREATE (e:E {id: r.id, embedding: vecf32(r.v)})",
                {"rows": rows})  # fmt: skip
    written = time.perf_counter()
    if not index_first:
        g.query(INDEX)
    while True:  # until the index answers (FalkorDB populates a new index in the background)
        status = g.query("CALL db.indexes() YIELD status RETURN status").result_set
        if all(s[0] == "OPERATIONAL" for s in status):
            break
        time.sleep(0.05)
    ready = time.perf_counter()
    top = g.query(TOPK, {"v": vecs[7].tolist()}).result_set[0][0]
    return {"index": "first" if index_first else "after", "writes_s": round(written - t, 1),
            "until_operational_s": round(ready - written, 1), "top1_is_self": top == 7}


def main() -> None:
    import falkordb
    import redis

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 43_000
    srv = EmbeddedServer(Path(tempfile.mkdtemp(prefix="hnsw-")))
    srv.ensure_running()
    try:
        r = redis.Redis(unix_socket_path=str(srv.socket_path))
        db = falkordb.FalkorDB(connection_pool=r.connection_pool)
        vecs = np.random.default_rng(0).standard_normal((n, 384)).astype(np.float32)
        print(fill(db.select_graph("a"), vecs, True), flush=True)
        print(fill(db.select_graph("b"), vecs, False), flush=True)
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
