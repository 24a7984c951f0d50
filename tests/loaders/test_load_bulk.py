"""The bulk path (GRAPH.BULK into an empty embedded graph, talent_core/store/falkordb_bulk.py)
gives exactly the graph of the MERGE path; reloads stay idempotent; bad rows still stop
the load at file:line; a batch interrupted between its two commands is finished; another
writer or a lost connection hands the load over to MERGE without a wrong edge."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import redis
from hash_embedder import HashEmbedder
from loader_helpers import BAD, FIXTURES

from talent_core.config import Settings
from talent_core.errors import LoadError
from talent_core.loaders.api import load_path
from talent_core.store import falkordb_bulk
from talent_core.store.export import _pages
from talent_core.store.falkordb_bulk import BulkSession, SeenTriples

DIM = 16


def load(path, fmt, store, tmp_path: Path, **kw):
    kw.setdefault("batch_size", 40)
    return load_path(path, fmt, store=store, embedder=HashEmbedder(DIM),
                     settings=Settings(data_dir=tmp_path), progress=False, **kw)  # fmt: skip


def snapshot(store) -> dict:
    """Everything in the graph: entities (id, name, name_lc, vector), relations (name,
    vector), triples (with multiplicity: a duplicated edge would show), counts, and that no
    bulk bookkeeping (`_v` lists, BULK_PENDING markers) is left."""
    ents = {r[0]: r[1:] for page in _pages(store, "entities", 1000) for r in page}
    rels = {r[0]: r[1] for page in _pages(store, "relations", 1000) for r in page}
    triples = sorted(tuple(r) for page in _pages(store, "triples", 1000) for r in page)
    assert store._read("bulk_pending") == []
    return {
        "entities": {k: (v[0], v[1]) for k, v in ents.items()},
        "entity_vectors": {k: np.asarray(v[2], dtype=np.float32) for k, v in ents.items()},
        "relations": sorted(rels),
        "relation_vectors": {k: np.asarray(v, dtype=np.float32) for k, v in rels.items()},
        "triples": triples,
        "stats": store.stats().model_dump(exclude={"store"}),
    }


def assert_same_graph(a: dict, b: dict) -> None:
    assert a["stats"] == b["stats"]
    assert a["entities"] == b["entities"]
    assert a["relations"] == b["relations"]
    assert a["triples"] == b["triples"]
    for kind in ("entity_vectors", "relation_vectors"):
        assert a[kind].keys() == b[kind].keys()
        for k, v in a[kind].items():
            # the MERGE path writes 8-decimal literals, the bulk path the exact float32
            np.testing.assert_allclose(v, b[kind][k], atol=1e-7, err_msg=k)


def assert_same_as_merge_load(store, kb: Path, embedded_store, tmp_path: Path) -> None:
    """`store` holds the graph that loading `kb` through MERGE into a fresh store gives."""
    reference = embedded_store(DIM)
    load(kb, "metaqa", reference, tmp_path, bulk=False)
    assert_same_graph(snapshot(reference), snapshot(store))


CASES = [  # (input, format, batch size)
    (FIXTURES / "metaqa" / "kb.txt", "metaqa", 40),
    (FIXTURES / "rog" / "webqsp_toy.jsonl", "rog", 40),  # triples repeated across batches
    (FIXTURES / "ntriples" / "sample.nt", "ntriples", 10),  # ids != names
    (FIXTURES / "triples" / "ids_with_labels.tsv", "triples", 2),
]


@pytest.mark.parametrize(("path", "fmt", "batch"), CASES, ids=[c[1] for c in CASES])
def test_bulk_path_gives_the_graph_of_the_merge_path(embedded_store, tmp_path, path, fmt, batch):
    merge, bulk = embedded_store(DIM), embedded_store(DIM)
    r1 = load(path, fmt, merge, tmp_path / "m", bulk=False, batch_size=batch)
    r2 = load(path, fmt, bulk, tmp_path / "b", batch_size=batch)
    assert r1.bulk_batches == 0
    assert r2.bulk_batches == r2.batches > 1
    if fmt == "rog":  # triples of earlier batches again: those went through MERGE
        assert r2.store_seconds_by_call.get("triples", 0) > 0
    assert_same_graph(snapshot(merge), snapshot(bulk))
    assert (r2.loaded, r2.new_triples, r2.new_entities_embedded, r2.new_relations_embedded) == (
        r1.loaded, r1.new_triples, r1.new_entities_embedded, r1.new_relations_embedded
    )  # fmt: skip
    # the bulk graph answers like the other one: vector search finds each entity itself
    emb = HashEmbedder(DIM)
    ents = snapshot(bulk)["entities"]
    for name, _ in (ents[k] for k in sorted(ents)[:10]):
        assert bulk.top_entities(emb.encode_one(name), 1)[0].score > 0.999


def test_names_that_need_escaping_round_trip(embedded_store, tmp_path):
    odd = ['Quote "q"', "back\\slash", "tab\there", "naïve café", "中文", "emoji 🎬",
           "semi;colon|", "a\rb", "x" * 3000]  # fmt: skip
    p = tmp_path / "odd.csv"
    rows = [("head", "relation", "tail")] + [(n, 'rel \\ "x"', f"t{i}") for i, n in enumerate(odd)]

    with open(p, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    merge, bulk = embedded_store(DIM), embedded_store(DIM)
    load(p, "triples", merge, tmp_path / "m", bulk=False, batch_size=3)
    rep = load(p, "triples", bulk, tmp_path / "b", batch_size=3)
    assert rep.bulk_batches == rep.batches
    assert_same_graph(snapshot(merge), snapshot(bulk))
    assert {e.id for e in bulk.entities_by_id(odd)} == set(odd)


def test_reload_after_a_bulk_load_is_idempotent(embedded_store, tmp_path):
    store = embedded_store(DIM)
    kb = FIXTURES / "metaqa" / "kb.txt"
    load(kb, "metaqa", store, tmp_path)
    before = snapshot(store)
    rep = load(kb, "metaqa", store, tmp_path, batch_size=70)
    assert rep.bulk_batches == 0  # a non-empty graph: MERGE
    assert (rep.new_triples, rep.new_entities_embedded, rep.new_relations_embedded) == (0, 0, 0)
    assert_same_graph(before, snapshot(store))


def test_bad_row_stops_a_bulk_load_at_file_line(embedded_store, tmp_path):
    store = embedded_store(DIM)
    good = (FIXTURES / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines()[:100]
    p = tmp_path / "kb.txt"
    p.write_text("\n".join(good[:90] + ["Alien|directed_by"] + good[90:]) + "\n")
    with pytest.raises(LoadError, match=r"kb.txt:91: expected 3 fields"):
        load(p, "metaqa", store, tmp_path)
    # batches 1-2 (rows 1-80) committed with the bulk command; nothing of batch 3
    assert store.stats().triples == 80
    assert store._read("bulk_pending") == []
    # skip mode: the same file loads around the bad row
    rep = load(p, "metaqa", embedded_store(DIM), tmp_path, on_error="skip",
               rejects=tmp_path / "rej.jsonl")  # fmt: skip
    assert rep.rejected == 1 and rep.bulk_batches == rep.batches
    assert json.loads((tmp_path / "rej.jsonl").read_text())["line"] == 91


def test_bad_rows_fixture_gives_the_same_errors_on_both_paths(embedded_store, tmp_path):
    for bulk in (False, True):
        with pytest.raises(LoadError) as e:
            load(BAD / "mixed_errors.txt", "metaqa", embedded_store(DIM), tmp_path, bulk=bulk)
        assert str(e.value).startswith(f"{BAD / 'mixed_errors.txt'}:3: ")


def test_batch_left_pending_is_finished_by_the_next_load(embedded_store, tmp_path, monkeypatch):
    """The loader dies between GRAPH.BULK and the vector conversion of a batch (simulated:
    the conversion never runs and the load stops): the next load converts the vectors."""
    store = embedded_store(DIM)
    kb = FIXTURES / "metaqa" / "kb.txt"
    calls = {"n": 0}
    real = BulkSession._convert

    def dying(self, g, lo, hi):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # as a kill would: nothing after the command runs
        return real(self, g, lo, hi)

    monkeypatch.setattr(BulkSession, "_convert", dying)
    with pytest.raises(KeyboardInterrupt):
        load(kb, "metaqa", store, tmp_path)
    monkeypatch.undo()
    assert len(store._read("bulk_pending")) == 1
    s = store.stats()
    assert s.entities_with_embedding < s.entities  # batch 3's vectors are still lists
    reference = embedded_store(DIM)
    load(kb, "metaqa", reference, tmp_path, bulk=False)
    rep = load(kb, "metaqa", store, tmp_path)
    assert rep.bulk_batches == 0
    assert_same_graph(snapshot(reference), snapshot(store))


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "serial"])
def test_vector_conversion_runs_beside_the_next_batch(embedded_store, tmp_path, monkeypatch,
                                                      overlap):  # fmt: skip
    """With overlap, GRAPH.BULK runs on the loading thread and each batch's conversion on the
    writer thread, and a batch's conversion ends before the next batch's command."""
    import threading

    events = []
    real_convert, real_check = BulkSession._convert, falkordb_bulk._check_reply

    def convert(self, g, lo, hi):
        events.append(("convert", threading.current_thread().name, lo))
        return real_convert(self, g, lo, hi)

    def check(reply, nodes):
        events.append(("bulk", threading.current_thread().name, None))
        return real_check(reply, nodes)

    monkeypatch.setattr(BulkSession, "_convert", convert)
    monkeypatch.setattr(falkordb_bulk, "_check_reply", check)
    store = embedded_store(DIM)
    rep = load(FIXTURES / "metaqa" / "kb.txt", "metaqa", store, tmp_path, overlap=overlap)
    assert rep.bulk_batches == rep.batches > 2
    assert [e[0] for e in events] == ["bulk", "convert"] * rep.batches
    main = threading.main_thread().name
    assert all(t == main for kind, t, _ in events if kind == "bulk")
    writer = {t for kind, t, _ in events if kind == "convert"}
    if overlap:
        assert writer and all(t.startswith("loader-writer") for t in writer)
    else:
        assert writer == {main}
    assert store._read("bulk_pending") == []


def lose_connection_on_call(monkeypatch, owner, name: str, n: int) -> None:
    """`owner.name` raises redis.ConnectionError on its n-th call (a lost connection)."""
    real = getattr(owner, name)
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == n:
            raise redis.ConnectionError("simulated")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, flaky)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "serial"])
def test_lost_reply_of_the_command_hands_the_batch_to_merge(
    embedded_store, tmp_path, monkeypatch, overlap
):
    store = embedded_store(DIM)
    kb = FIXTURES / "metaqa" / "kb.txt"
    # batch 2's command was applied, its reply "lost"
    lose_connection_on_call(monkeypatch, falkordb_bulk, "_check_reply", 2)
    rep = load(kb, "metaqa", store, tmp_path, overlap=overlap)
    assert rep.bulk_batches == 1 and rep.batches > 2  # batch 2 written again by MERGE
    assert_same_as_merge_load(store, kb, embedded_store, tmp_path)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "serial"])
def test_lost_connection_in_the_conversion_hands_over_to_merge(
    embedded_store, tmp_path, monkeypatch, overlap
):
    store = embedded_store(DIM)
    kb = FIXTURES / "metaqa" / "kb.txt"
    lose_connection_on_call(monkeypatch, BulkSession, "_convert", 2)  # batch 2's vectors
    rep = load(kb, "metaqa", store, tmp_path, overlap=overlap)
    # batch 2 is complete (its command answered); the hand-over converted its vectors
    # through the marker, and batches 3+ went through MERGE
    assert rep.bulk_batches == 2 and rep.batches > 3
    assert_same_as_merge_load(store, kb, embedded_store, tmp_path)


def test_batch_finished_by_another_loader_before_its_conversion(embedded_store, tmp_path,
                                                                monkeypatch):  # fmt: skip
    """Between a batch's GRAPH.BULK and its deferred conversion another loader of the same
    graph (its bulk session abandoned) finishes the batch through its marker: the first
    loader's conversion then finds the vectors converted, and the load goes on."""
    store = embedded_store(DIM)
    other = type(store)(store.data_dir, store.graph_name)
    calls = {"n": 0}
    real = BulkSession.convert_pending

    def raced(self, timer=None):
        if self.pending is not None:
            calls["n"] += 1
            if calls["n"] == 2:  # before this loader takes the write lock for it
                assert other.finish_pending_bulk() == 1
        return real(self, timer)

    monkeypatch.setattr(BulkSession, "convert_pending", raced)
    kb = FIXTURES / "metaqa" / "kb.txt"
    rep = load(kb, "metaqa", store, tmp_path)
    other.close()
    assert calls["n"] == rep.batches and rep.bulk_batches == rep.batches
    assert_same_as_merge_load(store, kb, embedded_store, tmp_path)


def test_another_writer_ends_the_bulk_session(embedded_store, tmp_path):
    store = embedded_store(DIM)
    other = type(store)(store.data_dir, store.graph_name)
    kb = FIXTURES / "metaqa" / "kb.txt"
    emb = HashEmbedder(DIM)

    def meddle(progress):
        if progress.batch == 1:  # between batches 1 and 2
            other.upsert_entities([("Intruder", "Intruder", emb.encode_one("Intruder"))])

    rep = load(kb, "metaqa", store, tmp_path, on_commit=meddle)
    other.close()
    assert rep.bulk_batches == 1 and rep.batches > 2
    reference = embedded_store(DIM)
    load(kb, "metaqa", reference, tmp_path, bulk=False)
    reference.upsert_entities([("Intruder", "Intruder", emb.encode_one("Intruder"))])
    assert_same_graph(snapshot(reference), snapshot(store))


def test_a_non_empty_graph_is_never_bulk_loaded(embedded_store, tmp_path):
    store = embedded_store(DIM)
    store.upsert_entities([("x", "x", HashEmbedder(DIM).encode_one("x"))])
    assert store.bulk_session(DIM, 100) is None
    rep = load(FIXTURES / "metaqa" / "kb.txt", "metaqa", store, tmp_path)
    assert rep.bulk_batches == 0


def test_id_cap_hands_over_to_merge(embedded_store, tmp_path):
    store = embedded_store(DIM)
    kb = FIXTURES / "metaqa" / "kb.txt"
    rep = load(kb, "metaqa", store, tmp_path, bulk_max_ids=60)
    assert 1 <= rep.bulk_batches < rep.batches
    assert_same_as_merge_load(store, kb, embedded_store, tmp_path)


def test_seen_triples_never_forgets():
    seen = SeenTriples(bits_log2=12)  # tiny: many false positives, never a false negative
    keys = [(f"h{i}", "r", f"t{i}") for i in range(2000)]
    assert not seen.maybe_seen(keys[:1000]).any()
    seen.add(keys[:1000])
    assert seen.maybe_seen(keys[:1000]).all()
    big = SeenTriples()
    big.add(keys[:1000])
    assert big.maybe_seen(keys[:1000]).all() and not big.maybe_seen(keys[1000:]).any()
