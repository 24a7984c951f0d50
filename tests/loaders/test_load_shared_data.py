"""The real data sets of ../shared/data (skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder

from talent_core.config import Settings
from talent_core.loaders.api import load_path

pytestmark = pytest.mark.data


def dry(path: Path, fmt: str, tmp_path: Path):
    return load_path(path, fmt, settings=Settings(data_dir=tmp_path), dry_run=True,
                     progress=False)  # fmt: skip


def test_metaqa_kb_validates_completely(shared_data: Path, tmp_path: Path):
    rep = dry(shared_data / "metaqa" / "kb.txt", "metaqa", tmp_path)
    assert (rep.rows_read, rep.loaded, rep.rejected, rep.duplicates) == (133_582, 133_582, 0, 0)
    assert rep.self_loops == 11  # e.g. "Malcolm X|written_by|Malcolm X": kept
    assert not (tmp_path / "questions").exists()  # a dry run writes nothing


def test_explagraphs_sample_parses_every_row(shared_data: Path, tmp_path: Path):
    rep = dry(shared_data / "explagraphs" / "train_dev_sample.tsv", "explagraphs", tmp_path)
    assert (rep.records, rep.rejected) == (2000, 0)
    assert rep.loaded == 8379


def test_webqsp_evidence_round_trip(shared_data: Path, tmp_path: Path, embedded_store):
    src = shared_data / "webqsp-evidence" / "dev.jsonl"
    recs = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()]
    # keys as stored: surrounding whitespace stripped (one record has "  Adventures by...")
    triples = {tuple(x.strip() for x in t) for r in recs for t in r["graph"]}
    ents = {x for h, _, t in triples for x in (h, t)}
    rels = {r for _, r, _ in triples}
    store = embedded_store(16)
    rep = load_path(src, "rog", store=store, embedder=HashEmbedder(16),
                    settings=Settings(data_dir=tmp_path), progress=False)  # fmt: skip
    st = store.stats()
    assert (st.entities, st.relations, st.triples) == (len(ents), len(rels), len(triples))
    assert rep.records == 400
    cvts = sorted(e for e in ents if e.startswith("m."))
    assert len(cvts) > 100
    assert {e.id: e.name for e in store.entities_by_id(cvts)} == {c: c for c in cvts}
    assert store.existing_relations(sorted(rels)) == rels
    kept = (tmp_path / "questions" / "webqsp-evidence-dev.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in kept] == [r["id"] for r in recs]
