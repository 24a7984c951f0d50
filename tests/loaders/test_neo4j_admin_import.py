"""`talent export --neo4j-import` run through Neo4j's own offline importer.

The export of test_export_neo4j's fixture (the toy MetaQA KB plus names with commas, quotes,
newlines, an entity without a vector) goes through the `import.sh` it writes, with
`neo4j-admin` = tests/neo4j/bin/neo4j-admin (org.neo4j.cli.AdminTool and
org.neo4j:neo4j-import-tool from Maven Central, on the launcher's class path), into the
home of a scratch launcher (NEO4J_STATE in tmp_path, beside any development server); that
server is started and read through Neo4jStore: counts, names, vectors and triples equal to
the source, and the vector index built on the imported vectors finds them.

Skips when the launcher is not built (`make neo4j-up` builds it); fails instead under
TALENT_REQUIRE_NEO4J (.ci/run).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_export_neo4j import DIM, ODD, load_fixture

from talent_core.store.export import export_neo4j_import

NEO4J_DIR = Path(__file__).resolve().parents[1] / "neo4j"
CTL = NEO4J_DIR / "neo4j_ctl.py"


def _launcher_built() -> bool:
    spec = importlib.util.spec_from_file_location("neo4j_ctl_probe", CTL)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return shutil.which("java") is not None and mod.classpath() is not None


@pytest.fixture
def scratch_env(tmp_path: Path) -> dict[str, str]:
    if not _launcher_built():
        if os.environ.get("TALENT_REQUIRE_NEO4J"):
            pytest.fail("TALENT_REQUIRE_NEO4J is set but the launcher is not built (make neo4j-up)")
        pytest.skip("the tests/neo4j launcher is not built (Java + Maven: `make neo4j-up`)")
    return {**os.environ, "NEO4J_STATE": str(tmp_path / "neo4j-state"), "SKIP_SCHEMA": "1",
            "PYTHON": sys.executable,
            "PATH": f"{NEO4J_DIR / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip


def _read_env(path: Path) -> dict[str, str]:
    pairs = (ln.split("=", 1) for ln in path.read_text().splitlines() if "=" in ln)
    return {k: v for k, v in pairs if not k.startswith("#")}


@pytest.mark.neo4j
@pytest.mark.slow  # over 30 s: the slow suite (CI runs both)
def test_neo4j_admin_imports_the_export(embedded_store, tmp_path, scratch_env):
    from talent_core.store.neo4j import Neo4jStore

    src = embedded_store(DIM)
    odd_edges = load_fixture(src, tmp_path)
    rep = export_neo4j_import(src, tmp_path / "export", part_rows=100, progress=False)
    r = subprocess.run([str(tmp_path / "export" / "import.sh")], env=scratch_env,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "IMPORT DONE" in r.stdout
    # an import into a database that exists is refused (the script never overwrites)
    again = subprocess.run([str(tmp_path / "export" / "import.sh")], env=scratch_env,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert again.returncode != 0
    subprocess.run([sys.executable, str(CTL), "up"], env=scratch_env, check=True, timeout=600)
    try:
        env = _read_env(Path(scratch_env["NEO4J_STATE"]) / "neo4j.env")
        dst = Neo4jStore(env["NEO4J_URI"], env["NEO4J_USER"], env["NEO4J_PASSWORD"])
        try:
            a, b = src.stats(), dst.stats()
            assert (b.entities, b.relations, b.triples, b.entities_with_embedding) == (
                a.entities, a.relations, a.triples, a.entities_with_embedding)  # fmt: skip
            assert (b.entities, b.relations, b.triples) == (rep.entities, rep.relations,
                                                           rep.triples)  # fmt: skip
            ids = [i for i, _ in ODD] + ["odd:novector", "Malcolm X", "Spike Lee"]
            want = {e.id: e.name for e in src.entities_by_id(ids)}
            assert {e.id: e.name for e in dst.entities_by_id(ids)} == want
            assert len(want) == len(ids)
            va = src.entity_vectors(ids)
            vb = dst.entity_vectors(ids)
            assert set(va) == set(vb) and "odd:novector" not in vb
            for k in va:
                np.testing.assert_allclose(vb[k], va[k], atol=1e-6)
            got = {(e.src, e.rel, e.dst) for e in
                   dst.triples_among([x for e in odd_edges for x in (e.src, e.dst)],
                                     sorted({e.rel for e in odd_edges}))}  # fmt: skip
            assert {(e.src, e.rel, e.dst) for e in odd_edges} <= got
            # the sources (issue 33): the same records, each triple's loads kept
            assert dst.source_records() == src.source_records()
            assert dst.source_counts() == src.source_counts()
            (kb,) = src.source_records()
            assert dst.source_triples(kb.id) == src.source_triples(kb.id)
            # the schema after the import (import.sh's cypher-shell step, here the store's)
            dst.ensure_schema(DIM)
            assert dst.top_entities(va["odd:mixed"], 1)[0].entity.id == "odd:mixed"
        finally:
            dst.close()
    finally:
        subprocess.run([sys.executable, str(CTL), "down"], env=scratch_env, timeout=300)
