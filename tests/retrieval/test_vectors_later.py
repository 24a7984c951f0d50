"""A graph loaded without its entity vectors (`talent load --vectors later`, `talent demo`)
answers as it will once `talent vectors` has filled them: retrieval embeds the names it
scores that have no stored vector yet."""

from __future__ import annotations

import pytest
from retrieval_helpers import as_edges, metaqa_fixture_questions

from talent_core.config import Settings
from talent_core.loaders.vectors import fill_vectors, vectors_left
from talent_core.pipeline import Pipeline
from talent_core.retrieval.neighbourhood import entity_similarity, entity_vectors
from talent_core.store.memory import MemoryStore


def later_store(triples, embedder) -> MemoryStore:
    """The triples in a MemoryStore as a `--vectors later` load leaves them: relations
    embedded, entities not."""
    store = MemoryStore()
    triples = list(dict.fromkeys(triples))
    ids = list(dict.fromkeys(x for h, _, t in triples for x in (h, t)))
    store.upsert_entities([(i, i, None) for i in ids])
    rels = sorted({r for _, r, _ in triples})
    store.upsert_relations(list(zip(rels, embedder.encode(rels), strict=True)))
    store.upsert_triples(as_edges(triples))
    return store


def test_similarities_and_vectors_of_entities_without_one_are_embedded_on_the_way(
        metaqa_triples, bow, mem_store):
    later = later_store(metaqa_triples, bow)
    ids = ["Inception", "Christopher Nolan", "Gravity"]
    q = bow.encode(["who directed Inception"])[0]
    assert later.entity_similarity(ids, q) == {}  # nothing stored
    got = entity_similarity(later, bow, ids, ids, q)
    want = mem_store.entity_similarity(ids, q)
    assert got.keys() == want.keys() == set(ids)
    for i in ids:
        assert got[i] == pytest.approx(want[i], abs=1e-6)
    vecs = entity_vectors(later, bow, ids, ids)
    stored = mem_store.entity_vectors(ids)
    for i in ids:
        assert vecs[i] == pytest.approx(stored[i], abs=1e-6)
    assert entity_vectors(later, None, ids, ids) == {}  # no embedder: the store's only


def _same(a, b) -> None:
    """The same S: anchors, nodes (with their prizes), edges, links. Not the seeds (nor the
    nodes' seed marks): vector linking (`top_entities`) finds an entity only once its
    vector is in the store."""
    keep = {"anchors", "edges", "links"}
    assert a.nodes and a.anchors  # a real S, not two empty ones
    assert a.model_dump(include=keep) == b.model_dump(include=keep)
    assert [(n.id, n.name) for n in a.nodes] == [(n.id, n.name) for n in b.nodes]
    # the store keeps its vectors re-normalised in float32: the last bits may differ
    assert [n.prize for n in a.nodes] == pytest.approx([n.prize for n in b.nodes], abs=1e-6)


@pytest.mark.parametrize(("hop", "method", "prizes"), [
    (1, "pcst", "default"), (2, "pcst", "default"), (2, "pcst", "paper"), (2, "grag", "default"),
])
def test_answers_while_the_vectors_fill_are_the_answers_after(metaqa_triples, bow, hop, method,
                                                              prizes):
    """S (anchors, nodes with their prizes, edges) is the same before the fill and after."""
    later = later_store(metaqa_triples, bow)
    settings = Settings(_env_file=None)
    questions = [q for q, _, _ in metaqa_fixture_questions(hop)][:6]
    before = Pipeline(settings=settings, store=later, embedder=bow, adapters="none")
    first = [before.retrieve(q, method=method, prizes=prizes) for q in questions]
    entities = later.stats().entities
    assert vectors_left(later) == (entities, entities)

    report = fill_vectors(later, bow, page=7)
    assert report.embedded == entities and report.left == 0
    assert vectors_left(later) == (0, entities)
    after = Pipeline(settings=settings, store=later, embedder=bow, adapters="none")
    for q, a in zip(questions, first, strict=True):
        _same(a, after.retrieve(q, method=method, prizes=prizes))


def test_a_fill_stopped_half_way_is_finished_by_the_next(metaqa_triples, bow):
    later = later_store(metaqa_triples, bow)
    total = later.stats().entities
    seen: list[tuple[int, int]] = []
    stop = iter([False, False, True])
    first = fill_vectors(later, bow, page=5, on_progress=lambda d, t: seen.append((d, t)),
                         cancel=lambda: next(stop))
    assert first.cancelled and first.embedded == 10 and first.left == total - 10
    assert seen == [(5, total), (10, total)]
    second = fill_vectors(later, bow, page=5)
    assert not second.cancelled and second.embedded == total - 10 and second.left == 0


def test_a_fill_gives_way_while_a_question_is_answered(metaqa_triples, bow, tmp_path):
    import threading
    import time

    from talent_core.store._common import answering, answering_now

    later = later_store(metaqa_triples, bow)
    total = later.stats().entities
    done: list = []
    with answering(tmp_path):
        assert answering_now(tmp_path)
        t = threading.Thread(target=lambda: done.append(fill_vectors(later, bow, tmp_path)))
        t.start()
        time.sleep(1.0)
        assert later.stats().entities_with_embedding == 0  # waiting, not embedding
    t.join(60)
    assert not answering_now(tmp_path)
    assert done and done[0].embedded == total and done[0].waited_seconds >= 0.8


def test_the_pipeline_holds_the_answering_lock_while_it_answers(metaqa_triples, bow, tmp_path):
    from talent_core.store._common import answering_now

    store = later_store(metaqa_triples, bow)
    seen: list[bool] = []
    real = store.entities_by_name

    def watched(names):
        seen.append(answering_now(tmp_path))
        return real(names)

    store.entities_by_name = watched
    pipe = Pipeline(settings=Settings(data_dir=tmp_path, _env_file=None), store=store,
                    embedder=bow, adapters="none")
    pipe.ask("who directed [Inception]", mode="retrieval")
    assert seen and all(seen)
    assert not answering_now(tmp_path)
