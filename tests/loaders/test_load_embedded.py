"""Loading into the embedded FalkorDB store: counts, idempotency, names and relations that
survive the round trip (CVT ids, dotted Freebase relations, N-Triples literals)."""

from __future__ import annotations

import json
from pathlib import Path

from hash_embedder import HashEmbedder
from loader_helpers import FIXTURES

from talent_core.config import Settings
from talent_core.loaders.api import load_path
from talent_core.store.base import ExpansionCaps

DIM = 16
CAPS = ExpansionCaps(fanout=50, max_nodes=2000, max_edges=5000)


def load(path, fmt, store, tmp_path: Path, **kw):
    return load_path(path, fmt, store=store, embedder=HashEmbedder(DIM),
                     settings=Settings(data_dir=tmp_path), progress=False, **kw)  # fmt: skip


def counts(store):
    s = store.stats()
    return s.entities, s.relations, s.triples, s.entities_with_embedding


def test_metaqa_fixture_counts_and_reload(embedded_store, tmp_path):
    store = embedded_store(DIM)
    triples = {
        tuple(x.split("|")) for x in (FIXTURES / "metaqa" / "kb.txt").read_text().split("\n") if x
    }
    ents = {t[0] for t in triples} | {t[2] for t in triples}
    rep = load(FIXTURES / "metaqa" / "kb.txt", "metaqa", store, tmp_path, batch_size=64)
    want = (len(ents), 9, len(triples), len(ents))
    assert counts(store) == want
    assert rep.new_triples == len(triples) and rep.new_entities_embedded == len(ents)
    rep2 = load(FIXTURES / "metaqa" / "kb.txt", "metaqa", store, tmp_path, batch_size=50)
    assert counts(store) == want
    assert rep2.new_triples == 0 and rep2.new_entities_embedded == 0
    assert rep2.new_relations_embedded == 0
    # the self-loop of the fixture is stored
    sub = store.neighbourhood(["Malcolm X"], 1, CAPS)
    assert any(e.src == e.dst == "Malcolm X" and e.rel == "written_by" for e in sub.edges)


def test_rog_cvt_names_and_dotted_relations_round_trip(embedded_store, tmp_path):
    store = embedded_store(DIM)
    src = FIXTURES / "rog" / "webqsp_toy.jsonl"
    recs = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()]
    triples = {tuple(t) for r in recs for t in r["graph"]}
    load(src, "rog", store, tmp_path, batch_size=25)
    ents = {x for h, _, t in triples for x in (h, t)}
    rels = {r for _, r, _ in triples}
    assert counts(store) == (len(ents), len(rels), len(triples), len(ents))
    cvts = sorted(e for e in ents if e.startswith("m."))
    got = store.entities_by_id(cvts)
    assert [(e.id, e.name) for e in got] == [(c, c) for c in cvts]
    # every triple of "who played jack in titanic" is in the store, relation text intact
    sub = store.neighbourhood(["Titanic"], 2, CAPS.model_copy(update={"fanout": 100}))
    edges = {(e.src, e.rel, e.dst) for e in sub.edges}
    assert ("Titanic", "film.film.starring", "m.0k5s9k") in edges
    assert ("m.0k5s9k", "film.performance.character", "Jack Dawson") in edges
    assert ("m.0k5s9k", "film.performance.actor", "Leonardo DiCaprio") in edges
    # the relation catalogue holds the dotted names, each with an embedding
    vec = HashEmbedder(DIM).encode(["people.person.place_of_birth"])[0]
    top = store.top_relations(vec, 1)
    assert top[0].name == "people.person.place_of_birth" and top[0].score > 0.999


def test_ntriples_ids_and_names_round_trip(embedded_store, tmp_path):
    store = embedded_store(DIM)
    load(FIXTURES / "ntriples" / "sample.nt", "ntriples", store, tmp_path)
    (e,) = store.entities_by_id(["http://example.org/film/Am%C3%A9lie"])
    assert e.name == "Amélie"
    lit = '"She said \\"Times are hard for dreamers.\\"\\tThe end.\\\\n"'
    (q,) = store.entities_by_id([lit])
    assert q.name == 'She said "Times are hard for dreamers."\tThe end.\\n'
    # the vector index returns the entity for the embedding of its own name
    vec = HashEmbedder(DIM).encode(["Philip K. Dick"])[0]
    top = store.top_entities(vec, 1)
    assert top[0].entity.id == "http://example.org/person/Philip_K._Dick"


def test_explagraphs_and_csv_load(embedded_store, tmp_path):
    store = embedded_store(DIM)
    tsv = FIXTURES / "explagraphs" / "sample.tsv"
    n_triples = tsv.read_text(encoding="utf-8").count("(")  # one "(a; r; b)" per triple
    rep = load(tsv, "explagraphs", store, tmp_path)
    assert rep.records == 10 and store.stats().triples == rep.loaded == n_triples
    store2 = embedded_store(DIM)
    rep = load(FIXTURES / "triples" / "sample.csv", "triples", store2, tmp_path)
    assert store2.stats().triples == 26 and rep.rejected == 0
    (e,) = store2.entities_by_id([("On Computable Numbers, with an Application to the "
                                  "Entscheidungsproblem")])  # fmt: skip
    assert e.name.startswith("On Computable Numbers, with")
