"""SubgraphRAG retriever: DDE and pseudo-labels on hand-made graphs (known answers), the
scorer's shapes, training on the fixture KG, and `retrieve(method="subgraphrag")`."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from retrieval_helpers import FIXTURES, BowEmbedder, memory_store

from talent_core.errors import ScorerError
from talent_core.questions import read_questions
from talent_core.retrieval import RetrievalConfig, retrieve
from talent_core.retrieval.subgraphrag import (
    META_FILE,
    TripleScorer,
    bundled_scorer_dir,
    dde,
    load_scorer,
    pseudo_labels,
    resolve_scorer,
    structure_features,
    structure_size,
    top_k,
)
from talent_core.training.subgraphrag import ScorerTrainConfig, fit_scorer

# a tiny directed graph: 0 -> 1, 0 -> 2, 1 -> 2, 2 -> 3
HEAD = np.array([0, 0, 1, 2])
TAIL = np.array([1, 2, 2, 3])


def _topic(*ids: int, n: int = 4) -> np.ndarray:
    t = np.zeros(n, dtype=bool)
    t[list(ids)] = True
    return t


def test_dde_forward_rounds_mean_over_in_neighbours():
    f1, f2, r1, r2 = dde(HEAD, TAIL, _topic(0), rounds=2, reverse_rounds=2)
    # one-hot (not-topic, topic): x0 = [0,1], [1,0], [1,0], [1,0]
    np.testing.assert_allclose(f1, [[0, 0], [0, 1], [0.5, 0.5], [1, 0]])
    np.testing.assert_allclose(f2, [[0, 0], [0, 0], [0, 0.5], [0.5, 0.5]])
    # reversed triples 1->0, 2->0, 2->1, 3->2, again from the one-hot
    np.testing.assert_allclose(r1, [[1, 0], [1, 0], [1, 0], [0, 0]])
    np.testing.assert_allclose(r2, [[1, 0], [1, 0], [0, 0], [0, 0]])


def test_dde_reverse_rounds_reach_the_heads_of_a_topic_tail():
    f1, r1, r2 = dde(HEAD, TAIL, _topic(3), rounds=1, reverse_rounds=2)
    np.testing.assert_allclose(f1, [[0, 0], [1, 0], [1, 0], [1, 0]])
    np.testing.assert_allclose(r1, [[1, 0], [1, 0], [0, 1], [0, 0]])
    np.testing.assert_allclose(r2, [[0.5, 0.5], [0, 1], [0, 0], [0, 0]])


def test_dde_counts_parallel_triples_and_structure_layout():
    head, tail = np.array([0, 0, 1]), np.array([2, 2, 2])  # two triples 0 -> 2
    (f1,) = dde(head, tail, _topic(0, n=3), rounds=1, reverse_rounds=0)
    np.testing.assert_allclose(f1[2], [1 / 3, 2 / 3])

    class G:  # the fields structure_features reads
        n, head, tail, topic = 4, HEAD, TAIL, _topic(0)

    s = structure_features(G, 2, 2, topic_pe=True)
    assert s.shape == (4, 2 + 8)
    np.testing.assert_allclose(s[:, :2], [[0, 1], [1, 0], [1, 0], [1, 0]])  # the one-hot
    np.testing.assert_allclose(s[:, 2:4], dde(HEAD, TAIL, _topic(0))[0])


def test_dde_undirected_rounds_reach_past_one_hop_and_discount_hubs():
    """MetaQA stores facts film -> person / value only. From the topic film F0: F1 shares
    its director D, F2 its year Y (a hub of 5 films); A1, A2 are their actors. Directed
    rounds say nothing about F1, F2, A1, A2; undirected ones do, the hub counting less."""
    #          F0 D  F1 Y  F2 F3 F4 F5 A1 A2
    head = np.array([0, 2, 0, 4, 5, 6, 7, 2, 4])
    tail = np.array([1, 1, 3, 3, 3, 3, 3, 8, 9])
    topic = _topic(0, n=10)
    directed = dde(head, tail, topic, rounds=2, reverse_rounds=2)
    for x in directed:
        assert not x[[2, 4, 8, 9], 1].any()  # the topic channel never reaches them
    out = dde(head, tail, topic, rounds=2, reverse_rounds=2, undirected_rounds=3)
    assert len(out) == 7
    for a, b in zip(out[:4], directed, strict=True):
        np.testing.assert_allclose(a, b)  # the directed rounds are unchanged
    u1, u2, u3 = (x[:, 1] for x in out[4:])
    np.testing.assert_allclose(u1[[1, 3]], [1 / 2, 1 / 5])  # D, Y: 1 of 2 / of 5 neighbours
    np.testing.assert_allclose(u2[[2, 4]], [(1 / 2) / 2, (1 / 5) / 2])  # F1 > F2
    np.testing.assert_allclose(u3[[8, 9]], [1 / 4, 1 / 10])  # A1 > A2
    np.testing.assert_allclose(out[4][:, 0] + out[4][:, 1], 1.0)  # every node has a neighbour

    class G:
        n, head, tail, topic = 4, HEAD, TAIL, _topic(0)

    s = structure_features(G, 2, 2, topic_pe=True, undirected_rounds=3)
    assert s.shape == (4, structure_size(2, 2, True, 3)) == (4, 2 + 8 + 6)
    np.testing.assert_allclose(s[:, :10], structure_features(G, 2, 2, topic_pe=True))


def test_pseudo_labels_all_directed_shortest_paths():
    # 0->1->2 and 0->3->2 (length 2), 0->5->6->2 (length 3), 2->4 (past the answer)
    head = np.array([0, 1, 0, 3, 2, 0, 5, 6])
    tail = np.array([1, 2, 3, 2, 4, 5, 6, 2])
    labels, kind = pseudo_labels(head, tail, 7, [0], [2])
    assert kind == "directed"
    assert labels.tolist() == [True, True, True, True, False, False, False, False]


def test_pseudo_labels_direction_rules():
    # answer -> topic only: that path counts
    labels, kind = pseudo_labels(np.array([2, 1]), np.array([0, 2]), 3, [0], [2])
    assert (kind, labels.tolist()) == ("directed", [True, False])
    # both directions: only the shorter (0 -> 1 of length 1, not 1 -> 7 -> 0)
    labels, _ = pseudo_labels(np.array([0, 1, 2]), np.array([1, 2, 0]), 3, [0], [1])
    assert labels.tolist() == [True, False, False]
    # parallel triples between the same two entities are all labelled
    labels, _ = pseudo_labels(np.array([0, 0, 1]), np.array([1, 1, 2]), 3, [0], [1])
    assert labels.tolist() == [True, True, False]


def test_pseudo_labels_undirected_fallback_and_none():
    # MetaQA shape: film 0 -starred-> actor 1 (topic), film 0 -directed-> director 2
    # (answer), film 3 -starred-> actor 4 (elsewhere)
    head, tail = np.array([0, 0, 3]), np.array([1, 2, 4])
    labels, kind = pseudo_labels(head, tail, 5, [1], [2])
    assert (kind, labels.tolist()) == ("undirected", [True, True, False])
    labels, kind = pseudo_labels(head, tail, 5, [1], [4])  # no path at all
    assert (kind, labels.any()) == ("none", False)
    labels, kind = pseudo_labels(head, tail, 5, [1], [1])  # the topic is the answer
    assert kind == "none"


def test_top_k_order_and_ties():
    s = np.array([0.1, 0.9, 0.5, 0.9, 0.2])
    assert top_k(s, 3).tolist() == [1, 3, 2]
    assert top_k(s, 10).tolist() == [1, 3, 2, 4, 0]


def test_scorer_shapes_and_factored_first_layer():
    torch.manual_seed(0)
    d, n, e, r = 8, 5, 7, 3
    m = TripleScorer(d, rounds=2, reverse_rounds=2, topic_pe=True)
    assert m.struct == 10 and m.hidden == d
    q = torch.randn(d)
    ent, struct = torch.randn(n, d), torch.randn(n, 10)
    non_text = torch.tensor([False, True, False, False, True])
    rel = torch.randn(r, d)
    h, rr, t = torch.randint(0, n, (e,)), torch.randint(0, r, (e,)), torch.randint(0, n, (e,))
    out = m(q, ent, non_text, struct, rel, h, rr, t)
    assert out.shape == (e,)
    # the same as the paper's Linear over the concatenation [q, h_e, r, t_e]
    h_e = torch.cat([torch.where(non_text[:, None], m.non_text.weight[0], ent), struct], 1)
    x = torch.cat([q.expand(e, -1), h_e[h], rel[rr], h_e[t]], 1)
    torch.testing.assert_close(out, m.pred(x).squeeze(-1))


# --- training on the fixture KG ------------------------------------------------------------


def _records(*hops: int):
    return [r for h in hops for r in read_questions(FIXTURES / "metaqa" / f"qa_{h}hop.txt")]


@pytest.fixture(scope="module")
def toy_scorer(tmp_path_factory, mem_store, bow):
    out = tmp_path_factory.mktemp("srag")
    cfg = RetrievalConfig(hops=2)
    meta = fit_scorer(_records(1, 2), _records(1), mem_store, bow, cfg,
                      ScorerTrainConfig(epochs=25, patience=25, seed=0, select_k=1), out,
                      progress=False)
    return out, meta


def test_training_reduces_loss_and_recovers_the_answers(toy_scorer):
    out, meta = toy_scorer
    losses = [h["loss"] for h in meta["history"] if h["loss"] is not None]
    assert losses[-1] < 0.5 * losses[0], losses
    assert meta["training"]["trained_on"] >= 30
    assert meta["training"]["label_kinds"]["undirected"] > 0  # the 2-hop questions
    v = meta["validation"]
    assert v["ans_recall@50"] == 1.0  # measured 1.0 (the fixture's 1-hop questions)
    untrained = meta["history"][0]
    assert untrained["epoch"] == 0 and v["triple_recall@50"] >= untrained["triple_recall@50"]
    saved = json.loads((out / META_FILE).read_text())
    assert saved["dimension"] == 64 and saved["embedder"] == "bow-test"
    assert saved["rounds"] == 2 and saved["reverse_rounds"] == 2


def test_training_resumes_and_refuses_another_configuration(toy_scorer, mem_store, bow,
                                                            tmp_path):
    out, meta = toy_scorer
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    cfg = RetrievalConfig(hops=2)
    again = fit_scorer(_records(1, 2), _records(1), mem_store, bow, cfg,
                       ScorerTrainConfig(epochs=25, patience=25, seed=0, select_k=1), copy,
                       progress=False)
    assert again["epochs_run"] == meta["epochs_run"]  # nothing left to train
    assert again["best_epoch"] == meta["best_epoch"]
    from talent_core.errors import ResumeMismatch

    with pytest.raises(ResumeMismatch):
        fit_scorer(_records(1, 2), _records(1), mem_store, bow, cfg,
                   ScorerTrainConfig(epochs=25, lr=0.01, seed=0, select_k=1), copy,
                   progress=False)


def _fit(out, epochs: int, patience: int = 25, max_minutes: float | None = None,
         store=None, bow=None):
    return fit_scorer(_records(1, 2), _records(1), store, bow, RetrievalConfig(hops=2),
                      ScorerTrainConfig(epochs=epochs, patience=patience, seed=0, select_k=1,
                                        max_minutes=max_minutes), out, progress=False)


def _weights(d):
    from safetensors.torch import load_file

    return load_file(str(d / "scorer.safetensors"))


def test_an_interrupted_run_resumes_to_the_same_model(mem_store, bow, tmp_path):
    """Stopped after 2 of 4 epochs (its epoch cap, as a killed run or a spent time budget
    leaves it), a rerun continues from epoch 3 and ends as one uninterrupted run: the same
    losses, validation curve, best epoch and weights."""
    straight = _fit(tmp_path / "straight", 4, store=mem_store, bow=bow)
    part = _fit(tmp_path / "resumed", 2, store=mem_store, bow=bow)
    assert part["epochs_run"] == 2 and part["stopped_by"] == "epochs"
    resumed = _fit(tmp_path / "resumed", 4, store=mem_store, bow=bow)
    assert resumed["epochs_run"] == 4 and resumed["stopped_by"] == "epochs"
    assert [h["epoch"] for h in resumed["history"]] == [0, 1, 2, 3, 4]
    for key in ("loss", "triple_recall@50", "ans_recall@1"):
        assert [h.get(key) for h in resumed["history"]] == \
            [h.get(key) for h in straight["history"]], key
    assert resumed["best_epoch"] == straight["best_epoch"]
    a, b = _weights(tmp_path / "straight"), _weights(tmp_path / "resumed")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    state = torch.load(tmp_path / "resumed" / "train_state.pt", weights_only=False)
    assert state["state"]["epoch"] == 4 and len(state["optim"]["state"]) > 0


def test_a_run_stopped_by_patience_continues_with_a_larger_one(mem_store, bow, tmp_path):
    first = _fit(tmp_path / "p", 25, patience=1, store=mem_store, bow=bow)
    assert first["stopped_by"] == "patience" and first["epochs_run"] < 25
    again = _fit(tmp_path / "p", 25, patience=1, store=mem_store, bow=bow)
    assert again["epochs_run"] == first["epochs_run"]  # nothing left: same patience
    more = _fit(tmp_path / "p", 25, patience=3, store=mem_store, bow=bow)
    assert more["epochs_run"] > first["epochs_run"]
    assert [h["epoch"] for h in more["history"]] == list(range(more["epochs_run"] + 1))


def test_undirected_rounds_train_save_load_and_retrieve(mem_store, bow, tmp_path):
    out = tmp_path / "und"
    meta = fit_scorer(_records(1, 2), _records(1), mem_store, bow, RetrievalConfig(hops=2),
                      ScorerTrainConfig(epochs=2, seed=0, select_k=1, undirected_rounds=2),
                      out, progress=False)
    assert meta["undirected_rounds"] == 2
    assert meta["training"]["config"]["undirected_rounds"] == 2
    s = load_scorer(out)
    assert s.model.undirected_rounds == 2 and s.model.struct == structure_size(2, 2, True, 2)
    c = retrieve("who directed Gravity", mem_store, bow,
                 RetrievalConfig(method="subgraphrag", hops=2, top_triples=5, scorer=str(out)),
                 ["Gravity"])
    assert 1 <= len(c.edges) <= 5
    from talent_core.errors import ResumeMismatch

    with pytest.raises(ResumeMismatch):  # a resumed run must keep the structure
        fit_scorer(_records(1, 2), _records(1), mem_store, bow, RetrievalConfig(hops=2),
                   ScorerTrainConfig(epochs=3, seed=0, select_k=1), out, progress=False)


def test_trained_scorer_ranks_the_gold_triple_first(toy_scorer, mem_store, bow):
    out, _ = toy_scorer
    c = retrieve("who directed Gravity", mem_store, bow,
                 RetrievalConfig(method="subgraphrag", hops=2, top_triples=3, scorer=str(out)),
                 ["Gravity"])
    top = c.edges[0]
    assert (top.src, top.rel, top.dst) == ("Gravity", "directed_by", "Alfonso Cuarón")
    assert all(0.0 <= e.prize <= 1.0 for e in c.edges)
    assert [e.prize for e in c.edges] == sorted((e.prize for e in c.edges), reverse=True)


@pytest.mark.parametrize("k", [1, 5, 40])
def test_retrieve_subgraphrag_returns_top_k_triples(toy_scorer, mem_store, bow, k):
    out, _ = toy_scorer
    c = retrieve("who acted in the films directed by Kathryn Bigelow", mem_store, bow,
                 RetrievalConfig(method="subgraphrag", top_triples=k, scorer=str(out)),
                 ["Kathryn Bigelow"])
    assert c.method == "subgraphrag"
    assert 1 <= len(c.edges) <= k
    ids = {n.id for n in c.nodes}
    assert ids == {x for e in c.edges for x in (e.src, e.dst)}  # the endpoints, no more
    assert len({(e.src, e.rel, e.dst) for e in c.edges}) == len(c.edges)
    seeds = {s.id for s in c.seeds}
    assert all(n.seed == (n.id in seeds) for n in c.nodes)
    assert any(n.seed and n.name == "Kathryn Bigelow" for n in c.nodes)
    assert {"neighbourhood", "score", "seeds", "embed", "total"} <= set(c.timings_ms)


def test_retrieve_without_anchor_triples_keeps_the_anchor(toy_scorer, bow):
    out, _ = toy_scorer
    store = memory_store([("Lonely Film", "release_year", "1999")], bow)
    c = retrieve("when was Nothing released", store, bow,
                 RetrievalConfig(method="subgraphrag", scorer=str(out)), ["Lonely Film"])
    assert len(c.edges) == 1
    store = memory_store([("A", "directed_by", "B")], bow)
    store.upsert_entities([("Island", "Island", bow.encode(["Island"])[0])])
    c = retrieve("who is Island", store, bow,
                 RetrievalConfig(method="subgraphrag", scorer=str(out)), ["Island"])
    assert c.edges == [] and [(n.id, n.seed) for n in c.nodes] == [("Island", True)]


def test_dimension_mismatch_is_a_clear_error(toy_scorer):
    out, _ = toy_scorer
    small = BowEmbedder(dim=16)
    store = memory_store([("Gravity", "directed_by", "Alfonso Cuarón")], small)
    with pytest.raises(ScorerError, match="64-d"):
        retrieve("who directed Gravity", store, small,
                 RetrievalConfig(method="subgraphrag", scorer=str(out)), ["Gravity"])


def test_scorer_paths_and_cache(toy_scorer, tmp_path):
    out, _ = toy_scorer
    assert resolve_scorer(str(out / "scorer.safetensors"), "x") == out
    assert load_scorer(out) is load_scorer(out)  # loaded once per process
    with pytest.raises(ScorerError, match="not a SubgraphRAG scorer"):
        resolve_scorer(str(tmp_path), "x")
    with pytest.raises(ScorerError, match="no bundled SubgraphRAG scorer"):
        resolve_scorer(None, "bow-test")


def test_bundled_scorer_is_for_the_default_embedder():
    d = resolve_scorer(None, "minilm")
    assert d == bundled_scorer_dir("sentence-transformers/all-MiniLM-L6-v2")
    s = load_scorer(d)
    assert s.meta["dimension"] == 384 and s.meta["embedder"] == "all-minilm-l6-v2"
    assert s.meta["training"]["questions"] > 0 and "validation" in s.meta
