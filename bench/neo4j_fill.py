"""Load a KG file into Neo4j with the vectors an embedded store already holds for its names.

For the parity bench (bench/neo4j_parity.py): `talent load`'s own path (`load_path`, the
same reader, batches and MERGE statements), but the embedder returns the embedded store's
stored vectors for every entity and relation text instead of re-running MiniLM, so both
stores hold bit-identical vectors and any difference in S is the stores' own (a name the
embedded store does not hold is an error). Clears the Neo4j database first.

    python bench/neo4j_fill.py ../shared/data/metaqa/kb.txt --format metaqa \
        --embedded-dir .talent/b/metaqa
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from bench_load import CachedEmbedder  # noqa: E402
from benchio import load_average  # noqa: E402

from talent_core.config import Settings  # noqa: E402
from talent_core.loaders.api import load_path  # noqa: E402
from talent_core.store.falkordb import FalkorDBStore  # noqa: E402
from talent_core.store.neo4j import Neo4jStore  # noqa: E402


def stored_vectors(src: FalkorDBStore, page: int = 5000) -> dict:
    """Every entity's and relation's stored vector, keyed by the text the loader embeds
    (entity name, relation name)."""
    ids = [r[0] for r in src._run("MATCH (e:Entity) RETURN e.id")]
    names = {e.id: e.name for i in range(0, len(ids), page)
             for e in src.entities_by_id(ids[i:i + page])}  # fmt: skip
    table: dict = {}
    for i in range(0, len(ids), page):
        for k, v in src.entity_vectors(ids[i : i + page]).items():
            table[names[k]] = v
    rels = [r[0] for r in src._run("MATCH (r:Relation) RETURN r.name")]
    table.update(src.relation_vectors(rels))
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--format", required=True)
    ap.add_argument("--embedded-dir", type=Path, required=True)
    args = ap.parse_args()
    settings = Settings(store="embedded", data_dir=args.embedded_dir)
    src = FalkorDBStore.from_settings(settings)
    t = time.perf_counter()
    table = stored_vectors(src)
    read_s = time.perf_counter() - t
    dim = len(next(iter(table.values())))
    dst = Neo4jStore.from_settings(settings.model_copy(update={"store": "neo4j"}))
    t = time.perf_counter()
    dst.clear()
    clear_s = time.perf_counter() - t
    dst.ensure_schema(dim)
    before = load_average()
    t = time.perf_counter()
    side = settings.model_copy(update={"data_dir": Path("/tmp") / "talent-neo4j-fill"})
    rep = load_path(args.path, args.format, store=dst, settings=side,
                    embedder=CachedEmbedder(table, dim), progress=False)  # fmt: skip
    wall = time.perf_counter() - t
    out = {"vectors_read_seconds": round(read_s, 2), "clear_seconds": round(clear_s, 2),
           "load_wall_seconds": round(wall, 2), "loaded": rep.loaded,
           "source": src.stats().model_dump(), "neo4j": dst.stats().model_dump(),
           "load_average_before": before, "load_average_after": load_average()}  # fmt: skip
    print(json.dumps(out))
    src.close()
    dst.close()


if __name__ == "__main__":
    main()
