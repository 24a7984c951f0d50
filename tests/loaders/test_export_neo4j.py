"""`talent export --neo4j-import`: the toy MetaQA KB (plus names with commas, quotes,
newlines) exported from the embedded store, the headers checked against Neo4j's import
header rules, and the CSVs read back with the csv module to the same graph and vectors.

The real `neo4j-admin database import full` needs a Neo4j installation and is not run here;
`validate_header` encodes the documented rules (Neo4j 5 Operations Manual, "Import" /
"CSV header format").

Issue 26: the export's folders are 0700 and its files 0600 whatever the umask, a target that
is (or holds) the store's own data dir is refused, and a full disk is `path: no space left
on device`, with nothing left behind."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import stat
from pathlib import Path

import numpy as np
import pytest
from hash_embedder import HashEmbedder
from loader_helpers import FIXTURES, small_tmpfs

from talent_core.config import Settings
from talent_core.errors import ExportError
from talent_core.loaders.api import load_path
from talent_core.models import Edge
from talent_core.store.export import export_neo4j_import

DIM = 16

# --- Neo4j's CSV header format, as documented ----------------------------------------------
# A header field is `[name]:KIND[(group)]` for the special fields (ID, START_ID, END_ID in a
# group; LABEL, TYPE, IGNORE without) or `name[:type]` for a property, type one of the
# importer's value types, `[]` for an array (elements split by --array-delimiter). Node files
# have exactly one ID field; relationship files exactly one START_ID and one END_ID and no
# ID/LABEL. Property names are unique within a header.
VALUE_TYPES = {"int", "long", "float", "double", "boolean", "byte", "short", "char",
               "string", "point", "date", "localtime", "time", "localdatetime", "datetime",
               "duration"}  # fmt: skip
FIELD = re.compile(
    r"^(?P<name>[^:]*)"
    r"(?::(?P<kind>ID|START_ID|END_ID|LABEL|TYPE|IGNORE)(?:\((?P<group>[^()]+)\))?"
    r"|:(?P<type>[a-z]+)(?P<array>\[\])?)?$"
)


def validate_header(fields: list[str], kind: str) -> dict:
    """Parse a header per Neo4j's rules; AssertionError on a violation. Returns
    {"id": (prop, group) | None, "start": group, "end": group, "props": {name: type}}."""
    assert kind in ("nodes", "relationships")
    out: dict = {"id": None, "start": None, "end": None, "type": False, "props": {}}
    for f in fields:
        m = FIELD.match(f)
        assert m, f"not a Neo4j header field: {f!r}"
        name, special, typ = m["name"], m["kind"], m["type"]
        if special is None:
            assert name, f"a property needs a name: {f!r}"
            if typ is not None:
                assert typ in VALUE_TYPES, f"unknown value type in {f!r}"
            assert name not in out["props"], f"duplicate property {name!r}"
            out["props"][name] = (typ or "string") + (m["array"] or "")
            continue
        if special == "ID":
            assert kind == "nodes", "ID in a relationship header"
            assert out["id"] is None, "more than one ID field"
            out["id"] = (name or None, m["group"])
        elif special in ("START_ID", "END_ID"):
            assert kind == "relationships", f"{special} in a node header"
            key = "start" if special == "START_ID" else "end"
            assert out[key] is None, f"more than one {special}"
            out[key] = m["group"] or ""
        elif special == "LABEL":
            assert kind == "nodes" and not m["group"], f"bad LABEL field {f!r}"
        elif special == "TYPE":
            assert kind == "relationships" and not m["group"] and not out["type"]
            out["type"] = True
        if name and special in ("ID",):
            assert name not in out["props"], f"duplicate property {name!r}"
            out["props"][name] = "string"
    if kind == "nodes":
        assert out["id"] is not None, "a node header needs an ID field"
    else:
        assert out["start"] is not None and out["end"] is not None, "START_ID and END_ID needed"
    return out


def test_validator_rejects_bad_headers():
    for bad, kind in ((["name", "embedding:float[]"], "nodes"),  # no ID
                      (["id:ID(E)", "x:ID(E)"], "nodes"),
                      (["id:ID", "v:vector"], "nodes"),
                      (["id:ID", "a", "a:int"], "nodes"),
                      ([":START_ID(E)", "rel"], "relationships"),
                      ([":START_ID", ":END_ID", ":LABEL"], "relationships"),
                      (["id:ID(E", "n"], "nodes")):  # fmt: skip
        with pytest.raises(AssertionError):
            validate_header(bad, kind)
    assert validate_header(["i:ID(G)", ":LABEL", "v:float[]"], "nodes")["props"]["v"] == "float[]"


# --- the export ---------------------------------------------------------------------------
ODD = [  # (id, name): what CSV quoting must survive
    ("odd:comma", "Smith, John"),
    ("odd:quote", 'The "Best" Movie'),
    ("odd:newline", "line one\nline two"),
    ("odd:crlf", "carriage\r\nreturn"),
    ("odd:mixed", '"quoted, with\nall", of; them'),
    ("odd:space", "  padded  "),
    ("odd:unicode", "Amélie — 東京"),
    ("odd:backslash", "back\\slash\\"),
]
ODD_RELS = ["rel, with comma", 'rel "quoted"', "rel\nmultiline"]


def load_fixture(store, tmp_path: Path):
    emb = HashEmbedder(DIM)
    load_path(FIXTURES / "metaqa" / "kb.txt", "metaqa", store=store, embedder=emb,
              settings=Settings(data_dir=tmp_path), progress=False)  # fmt: skip
    names = [n for _, n in ODD]
    store.upsert_entities([(i, n, v) for (i, n), v in zip(ODD, emb.encode(names), strict=True)])
    store.upsert_entities([("odd:novector", "No, vector", None)])  # an entity without embedding
    store.upsert_relations(list(zip(ODD_RELS, emb.encode(ODD_RELS), strict=True)))
    edges = [Edge(src=ODD[i][0], rel=ODD_RELS[i % 3], dst=ODD[i + 1][0]) for i in range(7)]
    edges.append(Edge(src="odd:novector", rel=ODD_RELS[0], dst="Malcolm X"))
    store.upsert_triples(edges)
    return edges


def read_kind(root: Path, files: list[str]) -> tuple[list[str], list[list[str]]]:
    with open(root / files[0], encoding="utf-8", newline="") as f:
        header = list(csv.reader(f))
    assert len(header) == 1, "a header file holds one line"
    rows: list[list[str]] = []
    for name in files[1:]:
        with open(root / name, encoding="utf-8", newline="") as f:
            rows.extend(csv.reader(f, strict=True))
    assert all(len(r) == len(header[0]) for r in rows)
    return header[0], rows


def parse_vec(text: str) -> np.ndarray | None:
    return np.array(text.split(";"), dtype=np.float32) if text else None


def test_export_round_trip(embedded_store, tmp_path):
    store = embedded_store(DIM)
    odd_edges = load_fixture(store, tmp_path)
    out = tmp_path / "neo4j-import"
    rep = export_neo4j_import(store, out, batch_size=37, part_rows=100, progress=False)
    st = store.stats()
    assert (rep.entities, rep.relations, rep.triples) == (st.entities, st.relations, st.triples)
    assert rep.dimension == DIM and rep.entities_with_embedding == st.entities_with_embedding
    assert len(rep.files["entities"]) > 2  # header + several parts
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".neo4j-import")]

    # headers: Neo4j's format, the project's data model
    h_ent, ents = read_kind(out, rep.files["entities"])
    h_rel, rels = read_kind(out, rep.files["relations"])
    h_tri, tris = read_kind(out, rep.files["triples"])
    e = validate_header(h_ent, "nodes")
    r = validate_header(h_rel, "nodes")
    t = validate_header(h_tri, "relationships")
    assert e["id"] == ("id", "Entity") and r["id"] == ("name", "Relation")
    assert e["props"] == {"id": "string", "name": "string", "name_lc": "string",
                          "embedding": "float[]"}  # fmt: skip
    assert r["props"] == {"name": "string", "embedding": "float[]"}
    assert (t["start"], t["end"], t["type"], t["props"]) == (
        "Entity", "Entity", True, {"rel": "string", "sources": "long[]"})  # fmt: skip

    # entities: the same ids, names, keys and vectors
    got = {row[0]: row for row in ents}
    assert len(got) == len(ents) == st.entities
    for i, name in [*ODD, ("odd:novector", "No, vector")]:
        assert got[i][1] == name  # commas, quotes, newlines, spaces survive
    want_names = {x.id: x.name for x in store.entities_by_id(list(got))}
    assert {i: row[1] for i, row in got.items()} == want_names
    from talent_core.text import normalise_name

    assert all(row[2] == normalise_name(row[1]) for row in ents)
    assert got["odd:novector"][3] == ""
    vecs = store.entity_vectors(list(got))
    assert len(vecs) == st.entities_with_embedding == st.entities - 1
    for i, v in vecs.items():
        np.testing.assert_allclose(parse_vec(got[i][3]), v, atol=1e-6)
    emb = HashEmbedder(DIM)
    np.testing.assert_allclose(parse_vec(got["odd:mixed"][3]), emb.encode([ODD[4][1]])[0],
                               atol=1e-6)  # fmt: skip

    # relation catalogue
    rgot = {row[0]: parse_vec(row[1]) for row in rels}
    assert set(ODD_RELS) <= set(rgot) and len(rgot) == st.relations
    for n, v in store.relation_vectors(list(rgot)).items():
        np.testing.assert_allclose(rgot[n], v, atol=1e-6)

    # triples: the fixture's and the odd ones, every endpoint an exported entity
    triples = {(s, rel, d) for s, d, rel, _, typ in tris}
    assert {typ for *_, typ in tris} == {"REL"}
    kb = {tuple(x.split("|")) for x in (FIXTURES / "metaqa" / "kb.txt").read_text().split("\n")
          if x}  # fmt: skip
    assert triples == kb | {(x.src, x.rel, x.dst) for x in odd_edges}
    assert len(tris) == len(triples) == st.triples
    assert {x for s, _, d in triples for x in (s, d)} <= set(got)

    # sources (issue 33): each triple's loads; the legacy ones (written without a load) empty
    listed = {(s, rel, d): ids for s, d, rel, ids, _ in tris}
    (kb_source,) = store.source_records()
    assert {listed[x] for x in kb} == {str(kb_source.id)}
    assert {listed[(x.src, x.rel, x.dst)] for x in odd_edges} == {""}
    h_src, srcs = read_kind(out, rep.files["sources"])
    assert validate_header(h_src, "nodes")["id"] == (None, "Source")
    want = kb_source.model_dump()
    assert srcs == [["source:1"] + [str(want[h.split(":")[0]]) for h in h_src[1:]]]
    assert rep.sources == 1

    # import.sh / README / manifest: the exact command, the schema step, the honest note
    script = (out / "import.sh").read_text()
    args = shlex.split(script.split("\n\n")[1].replace("\\\n", " ").replace('"$DATABASE"', "db"))
    assert args[:5] == ["neo4j-admin", "database", "import", "full", "db"]
    assert "--nodes=Entity=" + ",".join(rep.files["entities"]) in args
    assert "--relationships=REL=" + ",".join(rep.files["triples"]) in args
    assert "--nodes=Source=" + ",".join(rep.files["sources"]) in args
    assert {"--array-delimiter=;", "--multiline-fields=true", "--delimiter=,"} <= set(args)
    assert "--param 'dimension => 16' -f schema.cypher" in script
    assert "CREATE VECTOR INDEX entity_embedding" in (out / "schema.cypher").read_text()
    assert "not run here" in (out / "README.md").read_text()
    man = json.loads((out / "manifest.json").read_text())
    assert man["triples"] == st.triples and man["headers"]["entities"] == h_ent


def test_export_target_rules(embedded_store, tmp_path):
    store = embedded_store(DIM)
    store.upsert_entities([("a", "A", [1.0] + [0.0] * (DIM - 1)), ("b", "B", None)])
    store.upsert_relations([("r", None)])
    store.upsert_triples([Edge(src="a", rel="r", dst="b")])
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(ExportError, match="not empty.*--force"):
        export_neo4j_import(store, out, progress=False)
    assert (out / "keep.txt").exists()
    rep = export_neo4j_import(store, out, force=True, progress=False)
    assert not (out / "keep.txt").exists() and (out / "import.sh").exists()
    assert (rep.entities, rep.relations, rep.triples) == (2, 1, 1)
    _, rels = read_kind(out, rep.files["relations"])
    assert rels == [["r", ""]]
    # an empty existing directory is fine without --force
    empty = tmp_path / "empty"
    empty.mkdir()
    export_neo4j_import(store, empty, progress=False)
    assert (empty / "entities.header.csv").exists()


def _small_graph(store) -> None:
    store.upsert_entities([("a", "A", [1.0] + [0.0] * (DIM - 1)), ("b", "B", None)])
    store.upsert_relations([("r", None)])
    store.upsert_triples([Edge(src="a", rel="r", dst="b")])


def test_export_folders_and_files_are_owner_only(embedded_store, tmp_path):
    store = embedded_store(DIM)
    _small_graph(store)
    out = tmp_path / "new" / "deeper" / "out"
    old = os.umask(0o022)  # the usual umask: before, the export was 0755 / 0644
    try:
        export_neo4j_import(store, out, progress=False)
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes.pop("import.sh") == 0o700
    assert set(modes.values()) == {0o600}, modes
    for d in (out, out.parent, out.parent.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


@pytest.mark.parametrize("where", ["the data dir", "a folder holding it"])
def test_export_over_the_stores_own_data_dir_is_refused(tmp_path, where):
    """--force replaces the target: the data dir (or a folder holding it) would be deleted."""
    from talent_core.store.falkordb import FalkorDBStore

    store = FalkorDBStore(tmp_path / "home" / "data", "g")
    try:
        store.ensure_schema(DIM)
        _small_graph(store)
        target = store.data_dir if where == "the data dir" else tmp_path / "home"
        with pytest.raises(ExportError, match="is or holds the store's data dir"):
            export_neo4j_import(store, target, force=True, progress=False)
        assert store.stats().triples == 1 and (store.data_dir / "appendonlydir").is_dir()
    finally:
        store.stop_server()


def test_export_on_a_full_disk_names_it_and_leaves_nothing(embedded_store, tmp_path):
    store = embedded_store(DIM)
    load_fixture(store, tmp_path)
    with small_tmpfs(tmp_path / "disk", "16k") as disk:
        with pytest.raises(ExportError) as e:
            export_neo4j_import(store, disk / "out", progress=False)
        assert str(e.value).startswith(f"{disk / 'out'}: no space left on device")
        assert list(disk.iterdir()) == []  # no partial export, no temporary folder
