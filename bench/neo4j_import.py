"""Bench: `talent export --neo4j-import` of a loaded store, imported by Neo4j's own
`neo4j-admin database import full` into a fresh database, counts checked against the source.

The importer is org.neo4j:neo4j-import-tool 5.26 (Maven Central; on the tests/neo4j
launcher's class path): `tests/neo4j/bin/neo4j-admin` runs it, so the export's own
`import.sh` runs as written (SKIP_SCHEMA=1: no cypher-shell here; the store's schema is
created through the driver afterwards, timed). The database lives in a scratch launcher
state (NEO4J_STATE in a temp dir), started after the import on its own port, beside the
development server. Checked: entity / relation / triple / embedding counts equal to the
source's, 500 sampled entities' names and vectors, and their vector self-match once the
indexes are online.

    python bench/neo4j_import.py --embedded-dir .talent/b/metaqa
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np  # noqa: E402
from benchio import load_average, write_json_atomic  # noqa: E402

from talent_core.config import Settings  # noqa: E402
from talent_core.store.export import csv_reader, export_neo4j_import  # noqa: E402
from talent_core.store.falkordb import FalkorDBStore  # noqa: E402
from talent_core.store.neo4j import Neo4jStore  # noqa: E402

log = logging.getLogger("bench.neo4j_import")
NEO4J = ROOT / "tests" / "neo4j"
CTL = NEO4J / "neo4j_ctl.py"


def du_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


def read_env(path: Path) -> dict[str, str]:
    pairs = (ln.split("=", 1) for ln in path.read_text().splitlines() if "=" in ln)
    return {k: v for k, v in pairs if not k.startswith("#")}


def counts(store) -> dict[str, int]:
    st = store.stats()
    return {"entities": st.entities, "relations": st.relations, "triples": st.triples,
            "entities_with_embedding": st.entities_with_embedding}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embedded-dir", type=Path, required=True, help="the source store")
    ap.add_argument("--graph", default=None, help="the source graph (default: the settings')")
    ap.add_argument("--sample", type=int, default=500)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "neo4j_import.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    settings = Settings(store="embedded", data_dir=args.embedded_dir)
    if args.graph:
        settings = settings.model_copy(update={"graph_name": args.graph})
    src = FalkorDBStore.from_settings(settings)
    work = Path(tempfile.mkdtemp(prefix="talent-neo4j-import-"))
    state = work / "neo4j-state"
    env = {
        **os.environ,
        "NEO4J_STATE": str(state),
        "SKIP_SCHEMA": "1",
        "PYTHON": sys.executable,
        "PATH": f"{NEO4J / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    out: dict = {"command": "python bench/neo4j_import.py " + " ".join(sys.argv[1:]),
                 "cpus": os.cpu_count(), "load_average_before": load_average(),
                 "heap": os.environ.get("NEO4J_HEAP", "1g")}  # fmt: skip
    try:
        out["source"] = counts(src)
        t = time.perf_counter()
        rep = export_neo4j_import(src, work / "export", progress=False)
        out["export_seconds"] = round(time.perf_counter() - t, 2)
        out["export_mb"] = du_mb(work / "export")
        t = time.perf_counter()
        r = subprocess.run([str(work / "export" / "import.sh")], env=env, capture_output=True,
                           text=True)  # fmt: skip
        out["import_seconds"] = round(time.perf_counter() - t, 2)
        (work / "import.log").write_text(r.stdout + r.stderr)
        if r.returncode != 0:
            raise SystemExit(f"import.sh failed ({r.returncode}):\n{r.stdout[-4000:]}{r.stderr}")
        m = re.search(r"IMPORT DONE in ([^.]+)\.", r.stdout)
        out["importer_reported"] = m.group(1).strip() if m else None
        m = re.search(r"Imported:\s+(\d+) nodes\s+(\d+) relationships\s+(\d+) properties",
                      r.stdout)  # fmt: skip
        if m:
            out["importer_counts"] = dict(zip(("nodes", "relationships", "properties"),
                                              map(int, m.groups()), strict=True))  # fmt: skip
        m = re.search(r"Peak memory usage: (.+)", r.stdout)
        out["importer_peak_memory"] = m.group(1).strip() if m else None
        out["database_mb"] = du_mb(state / "home" / "data")
        t = time.perf_counter()
        subprocess.run([sys.executable, str(CTL), "up"], env=env, check=True)
        out["start_seconds"] = round(time.perf_counter() - t, 2)
        conn = read_env(state / "neo4j.env")
        dst = Neo4jStore(conn["NEO4J_URI"], conn["NEO4J_USER"], conn["NEO4J_PASSWORD"])
        try:
            out["imported"] = counts(dst)
            out["counts_equal"] = out["imported"] == out["source"]
            t = time.perf_counter()
            dst.ensure_schema(rep.dimension or 384)  # constraints, fulltext, vector indexes
            out["schema_and_index_seconds"] = round(time.perf_counter() - t, 2)
            ids = []  # every exported entity id, read back from the CSV parts
            for name in rep.files["entities"][1:]:
                with open(work / "export" / name, encoding="utf-8", newline="") as f:
                    ids.extend(row[0] for row in csv_reader(f))
            out["exported_ids"] = len(ids)
            sample = random.Random(0).sample(ids, min(args.sample, len(ids)))
            a = {e.id: e.name for e in src.entities_by_id(sample)}
            b = {e.id: e.name for e in dst.entities_by_id(sample)}
            va, vb = src.entity_vectors(sample), dst.entity_vectors(sample)
            diff = max(float(np.abs(va[k] - vb[k]).max()) for k in va) if va else None
            self_src = sum(src.top_entities(va[k], 1)[0].entity.id == k for k in va)
            self_dst = sum(dst.top_entities(vb[k], 1)[0].entity.id == k for k in vb)
            out["sample"] = {
                "entities": len(sample), "names_equal": a == b, "vectors": [len(va), len(vb)],
                "vector_max_abs_diff": diff,
                "self_match_top1": {"embedded": self_src, "neo4j": self_dst},
            }  # fmt: skip
        finally:
            dst.close()
        out["load_average_after"] = load_average()
        write_json_atomic(args.out, out)
        print({k: v for k, v in out.items() if k not in ("load_average_before",)})
    finally:
        subprocess.run([sys.executable, str(CTL), "down"], env=env)
        src.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
