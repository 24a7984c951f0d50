"""The pipeline on an in-memory store: batching, embedding each new name once, idempotency,
limits, dry runs, side outputs, acknowledgement order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from loader_helpers import BAD, FIXTURES, FakeStore

from talent_core.config import Settings
from talent_core.errors import LoadError
from talent_core.loaders.api import dataset_name, detect_format, load_path

KB = FIXTURES / "metaqa" / "kb.txt"


def kb_counts() -> tuple[int, int, int]:
    triples = {tuple(line.rstrip("\n").split("|")) for line in KB.open(encoding="utf-8")}
    ents = {t[0] for t in triples} | {t[2] for t in triples}
    return len(triples), len(ents), len({t[1] for t in triples})


def load(path, fmt, store, tmp_path: Path, embedder=None, **kw):
    return load_path(
        path,
        fmt,
        store=store,
        embedder=embedder or HashEmbedder(16),
        settings=Settings(data_dir=tmp_path / "data"),
        progress=False,
        **kw,
    )


def test_counts_and_each_name_embedded_once(fake_store: FakeStore, tmp_path: Path):
    emb = HashEmbedder(16)
    n_triples, n_ents, n_rels = kb_counts()
    rep = load(KB, "metaqa", fake_store, tmp_path, embedder=emb, batch_size=37)
    assert (rep.loaded, rep.new_triples) == (n_triples, n_triples)
    assert rep.new_entities_embedded == n_ents and rep.new_relations_embedded == n_rels
    assert sum(emb.calls) == n_ents + n_rels  # nothing embedded twice across batches
    st = fake_store.stats()
    assert (st.entities, st.relations, st.triples) == (n_ents, n_rels, n_triples)
    assert rep.batches == -(-n_triples // 37)
    # the vectors are the embedder's vectors for the names
    name, vec = fake_store.entities["Christopher Nolan"]
    assert name == "Christopher Nolan"
    assert vec == pytest.approx(emb.encode(["Christopher Nolan"])[0])


def test_reload_is_idempotent_and_embeds_nothing(fake_store: FakeStore, tmp_path: Path):
    load(KB, "metaqa", fake_store, tmp_path, batch_size=50)
    before = fake_store.stats()
    emb = HashEmbedder(16)
    rep = load(KB, "metaqa", fake_store, tmp_path, embedder=emb, batch_size=50)
    assert fake_store.stats() == before
    assert rep.new_triples == 0 and rep.new_entities_embedded == 0 and sum(emb.calls) == 0


def test_writes_per_batch_are_entities_then_relations_then_triples(fake_store, tmp_path):
    load(KB, "metaqa", fake_store, tmp_path, batch_size=100)
    kinds = [k for k, _ in fake_store.calls]
    assert kinds[:3] == ["entities", "relations", "triples"]
    # every batch ends with its triples; entities never come after the batch's triples
    assert kinds[-1] == "triples"
    assert sum(n for k, n in fake_store.calls if k == "triples") == kb_counts()[0]


def test_commit_callback_only_after_store_ack(fake_store, tmp_path):
    fake_store.fail_on_triples_call = 3  # the store dies while writing batch 3
    seen = []
    with pytest.raises(ConnectionError):
        load(KB, "metaqa", fake_store, tmp_path, batch_size=40, on_commit=seen.append)
    assert [(p.batch, p.triples_committed, p.through_line) for p in seen] == [
        (1, 40, 40),
        (2, 80, 80),
    ]
    assert len(fake_store.triples) == 80  # every reported triple is in the store


def test_limit_counts_rows(fake_store, tmp_path):
    rep = load(KB, "metaqa", fake_store, tmp_path, limit=10, batch_size=3)
    assert rep.rows_read == 10 and len(fake_store.triples) == 10


def test_dry_run_validates_everything_and_writes_nothing(fake_store, tmp_path):
    rep = load(KB, "metaqa", fake_store, tmp_path, dry_run=True)
    assert rep.dry_run and rep.loaded == kb_counts()[0] and fake_store.calls == []
    with pytest.raises(LoadError, match=":3: "):
        load(BAD / "mixed_errors.txt", "metaqa", fake_store, tmp_path, dry_run=True)


def test_rog_merges_graphs_and_keeps_questions(fake_store, tmp_path):
    src = FIXTURES / "rog" / "webqsp_toy.jsonl"
    recs = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()]
    triples = {tuple(t) for r in recs for t in r["graph"]}
    ents = {x for h, _, t in triples for x in (h, t)}
    rep = load(src, "rog", fake_store, tmp_path, batch_size=10)
    assert rep.records == 35 and len(fake_store.triples) == len(triples) == rep.new_triples
    assert set(fake_store.entities) == ents  # one node per name across questions
    assert rep.duplicates + rep.loaded == sum(len(r["graph"]) for r in recs)
    qfile = tmp_path / "data" / "questions" / "webqsp_toy.jsonl"
    assert rep.side_output_file == str(qfile)
    kept = [json.loads(x) for x in qfile.read_text(encoding="utf-8").splitlines()]
    assert [k["id"] for k in kept] == [r["id"] for r in recs]
    assert kept[4]["answer"] == recs[4]["answer"] and kept[4]["q_entity"] == recs[4]["q_entity"]
    first = qfile.read_bytes()
    load(src, "rog", fake_store, tmp_path)  # idempotent: same file content, same store
    assert qfile.read_bytes() == first and len(fake_store.triples) == len(triples)


def test_rog_limit_counts_records(fake_store, tmp_path):
    rep = load(FIXTURES / "rog" / "webqsp_toy.jsonl", "rog", fake_store, tmp_path, limit=3,
               dataset="toy3")  # fmt: skip
    assert rep.records == 3
    kept = (tmp_path / "data" / "questions" / "toy3.jsonl").read_text().splitlines()
    assert len(kept) == 3
    recs = [json.loads(x) for x in (FIXTURES / "rog" / "webqsp_toy.jsonl").open()][:3]
    assert fake_store.triples == {tuple(t) for r in recs for t in r["graph"]}


def test_failed_load_leaves_no_side_output(fake_store, tmp_path):
    with pytest.raises(LoadError):
        load(BAD / "rog_bad.jsonl", "rog", fake_store, tmp_path)
    qdir = tmp_path / "data" / "questions"
    assert not any(qdir.glob("*")) if qdir.exists() else True


def test_explagraphs_examples_kept_with_labels(fake_store, tmp_path):
    rep = load(FIXTURES / "explagraphs" / "sample.tsv", "explagraphs", fake_store, tmp_path)
    assert rep.records == 10 and rep.rejected == 0
    kept = [
        json.loads(x)
        for x in (tmp_path / "data" / "questions" / "sample.jsonl").read_text().splitlines()
    ]
    assert [k["label"] for k in kept].count("support") == 5
    for k in kept:  # every example's graph is recoverable from the store by its node ids
        got = {(h, r, t) for h, r, t in fake_store.triples if h in k["node_ids"]}
        want = {(f"{k['id']}/{h}", r, f"{k['id']}/{t}") for h, r, t in k["graph"]}
        assert got == want


def test_format_detection_and_dataset_names(tmp_path):
    assert detect_format("x/kb.txt") == "metaqa"
    assert detect_format("a.nt") == "ntriples"
    assert detect_format("a.parquet") == "rog"
    assert detect_format("a.tsv") == "triples"
    assert detect_format("rmanluo/RoG-webqsp") == "rog"
    with pytest.raises(LoadError, match="pass --format"):
        detect_format("notes.txt")
    d = tmp_path / "webqsp-evidence"
    d.mkdir()
    (d / "dev.jsonl").write_text("")
    assert dataset_name(str(d / "dev.jsonl")) == "webqsp-evidence-dev"
    assert dataset_name("rmanluo/RoG-cwq", "test") == "RoG-cwq-test"


def test_gzip_line_formats(tmp_path):
    """kb.txt.gz is detected as MetaQA and read through gzip (the demo KB ships so)."""
    import gzip

    gz = tmp_path / "kb.txt.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write("Gravity|directed_by|Alfonso Cuarón\nGravity|release_year|2013\n")
    assert detect_format(str(gz)) == "metaqa"
    report = load_path(str(gz), None, dry_run=True, progress=False)
    assert report.rows_read == 2 and report.rejected == 0
    with pytest.raises(LoadError, match="decompress"):
        detect_format(str(tmp_path / "dev.jsonl.gz"))


def test_vectors_reach_the_store_as_the_embedder_dimension(fake_store, tmp_path):
    load(FIXTURES / "ntriples" / "sample.nt", "ntriples", fake_store, tmp_path,
         embedder=HashEmbedder(24))  # fmt: skip
    assert fake_store.dimension == 24
    assert {v.shape for _, v in fake_store.entities.values()} == {(24,)}
    assert {v.shape for v in fake_store.relations.values()} == {(24,)}


class _SlowWriteStore(FakeStore):
    """Entity writes of batch k block until batch k+1 asked which entities exist, so the
    next batch is always prepared before the previous one reached the store."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self.asked = threading.Semaphore(0)
        self.batches_asked = 0

    def existing_entities(self, ids):
        self.batches_asked += 1
        if self.batches_asked > 1:
            self.asked.release()
        return super().existing_entities(ids)

    def upsert_entities(self, rows):
        self.asked.acquire(timeout=1)  # the last batch has no successor: times out
        super().upsert_entities(rows)


def test_overlapped_batches_do_not_embed_in_flight_names_twice(tmp_path):
    store = _SlowWriteStore()
    emb = HashEmbedder(16)
    n_triples, n_ents, n_rels = kb_counts()
    rep = load(KB, "metaqa", store, tmp_path, embedder=emb, batch_size=150)
    assert rep.batches == 3 and len(store.triples) == n_triples
    assert sum(emb.calls) == n_ents + n_rels
    assert store.stats().entities == n_ents


def test_sequential_mode_gives_the_same_store(tmp_path):
    a, b = FakeStore(), FakeStore()
    load(KB, "metaqa", a, tmp_path, batch_size=40, overlap=True)
    load(KB, "metaqa", b, tmp_path, batch_size=40, overlap=False)
    assert a.triples == b.triples and a.entities.keys() == b.entities.keys()


def test_surrounding_whitespace_is_stripped_from_keys(fake_store, tmp_path):
    p = tmp_path / "kb.txt"
    p.write_text("  Alien |directed_by| Ridley Scott\nAlien|release_year|1979\n")
    rep = load(p, "metaqa", fake_store, tmp_path)
    assert rep.whitespace_stripped == 1
    assert fake_store.triples == {
        ("Alien", "directed_by", "Ridley Scott"),
        ("Alien", "release_year", "1979"),
    }


def test_nul_in_a_name_is_rejected(fake_store, tmp_path):
    p = tmp_path / "kb.txt"
    p.write_text("Alien|directed_by|Ridley\x00Scott\nAlien|release_year|1979\n")
    with pytest.raises(LoadError, match=r"kb.txt:1: tail contains a NUL character"):
        load(p, "metaqa", fake_store, tmp_path)


@pytest.mark.parametrize("fmt", ["metaqa", "triples", "rog"])
def test_memory_does_not_grow_with_the_file(tmp_path, fmt):
    """Peak Python memory of a (dry-run) load of a 10x larger file stays about the same:
    the reader streams, and only one batch is held."""
    import tracemalloc

    def make(n: int) -> Path:
        p = tmp_path / f"kb{n}.{ {'metaqa': 'txt', 'triples': 'csv', 'rog': 'jsonl'}[fmt] }"
        with open(p, "w", encoding="utf-8") as f:
            if fmt == "triples":
                f.write("head,relation,tail\n")
            for i in range(n):
                h, t = f"Movie number {i}", f"Actor number {i * 7 % 99991}"
                if fmt == "metaqa":
                    f.write(f"{h}|starred_actors|{t}\n")
                elif fmt == "triples":
                    f.write(f'"{h}",starred_actors,"{t}"\n')
                elif i % 10 == 0:  # rog: records of 10 triples
                    g = [[f"Movie number {j}", "film.film.starring", t] for j in range(i, i + 10)]
                    rec = {"id": str(i), "question": "q", "answer": [t], "graph": g}
                    f.write(json.dumps(rec) + "\n")
        return p

    peaks = []
    for n in (2_000, 20_000):
        path = make(n)
        tracemalloc.start()
        rep = load(path, fmt, None, tmp_path, dry_run=True, batch_size=200)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert rep.loaded == n
    assert peaks[1] < 1.3 * peaks[0] + 100_000, peaks


def test_progress_bar_shows_committed_triples_per_second(fake_store, tmp_path, capsys):
    load_path(KB, "metaqa", store=fake_store, embedder=HashEmbedder(8),
              settings=Settings(data_dir=tmp_path), batch_size=100, progress=True)  # fmt: skip
    err = capsys.readouterr().err
    assert "load metaqa" in err and "triples/s" in err and "committed=377 triples" in err
