"""G-Retriever's graph soft prompt (talent_core.llm.graph_prompt): invariance, gradients,
training with resume, and inference through the generator."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hash_embedder import HashEmbedder
from tiny_llm import sample_candidate, sample_examples

from talent_core.llm import graph_prompt as gp
from talent_core.llm.data import TrainingExample
from talent_core.llm.features import fit_generator_view
from talent_core.llm.loading import load_models
from talent_core.llm.models import add_lora, load_base, lora_config
from talent_core.models import OutOfCandidate, Selection
from talent_core.training.graph_trainer import example_loss
from talent_core.training.llm import train_generator
from talent_core.training.trainer import TrainConfig

EMB = HashEmbedder(16)


def _module(llm_hidden: int = 32, seed: int = 0, **kw):
    torch.manual_seed(seed)
    return gp.build(gp.GraphPromptConfig(llm_hidden=llm_hidden, in_dim=16, hidden=16,
                                         heads=2, proj_hidden=24, **kw)).eval()


def _permuted(graph: gp.GraphInput, perm: list[int]) -> gp.GraphInput:
    """The same graph with node i stored at position perm[i], edges listed in reverse."""
    nodes = [""] * len(graph.nodes)
    for i, name in enumerate(graph.nodes):
        nodes[perm[i]] = name
    edges = [(perm[s], r, perm[d]) for s, r, d in reversed(graph.edges)]
    return gp.GraphInput(nodes, edges)



def cameron_selected(out_of_candidate: str):
    """The sample candidate S, its nodes by name, and a selection of James Cameron plus one
    ungrounded name outside S."""
    c = sample_candidate()
    by_name = {n.name: n for n in c.nodes}
    sel = Selection(names=["james cameron"], selected=[by_name["James Cameron"]],
                    out_of_candidate=[OutOfCandidate(name=out_of_candidate, grounded=False)])
    return c, by_name, sel

def test_prompt_graph_is_the_eq14_context() -> None:
    c, by_name, sel = cameron_selected(out_of_candidate="Avatar")
    g = gp.prompt_graph(c, sel)
    names = [n.lower() for n in g.nodes]
    # the selected node, the other end of its edges, the out-of-S name as an isolated node
    assert "james cameron" in names and "titanic" in names and "avatar" in names
    assert all("james cameron" in (names[s], names[d]) for s, _, d in g.edges)
    full = gp.prompt_graph(c, None)
    assert len(full.nodes) == len({n.name.lower() for n in c.nodes})
    assert len(full.edges) == len({(e.src, e.rel, e.dst) for e in c.edges})


def test_soft_prompt_ignores_node_order() -> None:
    graph = gp.prompt_graph(sample_candidate(), None)
    assert len(graph.nodes) >= 4 and graph.edges
    module = _module(tokens=2)
    perm = list(range(len(graph.nodes)))[::-1]
    perm = perm[1:] + perm[:1]
    a = gp.GraphPrompter(module, EMB.encode)(graph)
    b = gp.GraphPrompter(module, EMB.encode)(_permuted(graph, perm))
    assert a.shape == (2, 32)
    assert torch.allclose(a, b, atol=1e-5)
    # and it does depend on the graph: another edge set gives another prompt
    other = gp.GraphInput(graph.nodes, graph.edges[:1])
    assert not torch.allclose(a, gp.GraphPrompter(module, EMB.encode)(other), atol=1e-4)
    empty = gp.GraphPrompter(module, EMB.encode)(gp.GraphInput())
    assert empty.shape == (2, 32) and torch.isfinite(empty).all()


def test_gradients_reach_the_gnn(tiny_dir, settings, tiny_tok) -> None:
    from talent_core.llm.features import generator_features

    model, tok, device = load_base(str(tiny_dir), settings)
    model = add_lora(model, lora_config())
    module = _module(llm_hidden=model.config.hidden_size).train()
    c = sample_candidate()
    f = generator_features(tok, "who directed titanic", c, None, ["James Cameron"], 2048)
    graph = gp.graph_tensors(gp.prompt_graph(c, None), EMB.encode)
    loss = example_loss(model, module, f, graph, tok.pad_token_id, device)
    loss.backward()
    assert math.isfinite(float(loss.detach()))
    for name, p in module.named_parameters():
        assert p.grad is not None and float(p.grad.abs().sum()) > 0, name
    assert any(p.grad is not None and float(p.grad.abs().sum()) > 0
               for n, p in model.named_parameters() if "lora_B" in n)  # B starts at 0


def test_text_budget_zero_leaves_only_the_question(tiny_tok) -> None:
    c = sample_candidate()
    full, view = fit_generator_view(tiny_tok, "who directed titanic", c, None, 4096)
    empty, none = fit_generator_view(tiny_tok, "who directed titanic", c, None, 4096,
                                     text_budget=0)
    assert view.nodes and not none.nodes and not none.edges
    some, part = fit_generator_view(tiny_tok, "who directed titanic", c, None, 4096,
                                    text_budget=12)
    assert 0 < len(part.nodes) < len(view.nodes)
    assert len(tiny_tok(some.prompt)["input_ids"]) <= len(tiny_tok(empty.prompt)["input_ids"]) + 12


def _examples(n: int = 3) -> list[TrainingExample]:
    return sample_examples(n)


def _config(out: Path, tiny_dir: Path, **kw) -> TrainConfig:
    base = {"output_dir": out, "base_model": str(tiny_dir), "epochs": 2, "grad_accum": 1,
            "lr": 1e-2, "graph_lr": 1e-2, "warmup_ratio": 0.0, "save_every": 0,
            "progress": False, "seed": 3, "graph_prompt": True, "graph_hidden": 16,
            "graph_heads": 2}
    base.update(kw)
    return TrainConfig(**base)


def test_graph_prompt_generator_trains_resumes_and_answers(tiny_dir, settings, tmp_path,
                                                            candidate) -> None:
    examples = _examples(3)
    full = train_generator(examples, _config(tmp_path / "a", tiny_dir), None, source="none",
                           settings=settings, embedder=EMB, val_examples=examples[:1])
    m = full.metrics
    assert m["steps"] == 6 and m["graph_parameters"] > 0 and math.isfinite(m["val_loss"])
    assert gp.has_graph_prompt(tmp_path / "a")

    class Crash(RuntimeError):
        pass

    def crash(step: int, loss: float) -> None:
        if step == 5:
            raise Crash

    cfg = _config(tmp_path / "b", tiny_dir, save_every=2, keep_checkpoints=1)
    with pytest.raises(Crash):
        train_generator(examples, cfg, None, source="none", settings=settings, embedder=EMB,
                        on_step=crash)
    assert sorted(p.name for p in (tmp_path / "b" / "checkpoints").glob("*.pt")) == [
        "checkpoint-4.pt"]
    resumed = train_generator(examples, cfg, None, source="none", settings=settings,
                              embedder=EMB)
    assert resumed.metrics["resumed_from_step"] == 4
    a = gp.load(tmp_path / "a").state_dict()
    b = gp.load(tmp_path / "b").state_dict()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k

    # inference: the generator is a graph-prompt one, and the soft prompt changes the scores
    _, gen = load_models(None, None, tmp_path / "a", settings, embed=EMB.encode)
    assert gen.kind == "graph-prompt"
    # another role on the same adapter (the stance task builds one per ask) shares the
    # module read at load: no second read from disk
    from talent_core.llm.generator import GeneratorModel

    again = GeneratorModel(gen.lm, gen.adapter, embed=EMB.encode)
    assert again.prompter.module is gen.prompter.module
    ctx = gen.context("who directed titanic", candidate, None)
    assert ctx.graph is not None and ctx.graph.nodes
    ranked = gen.rank("who directed titanic", ctx)
    assert {s.name for s in ranked} == {n for _, n in ctx.nodes}
    prompt = gen._rendered("who directed titanic", ctx)
    plain = gen.lm.score(prompt.prompt + prompt.answer_prefix, gen.adapter,
                         [n for _, n in ctx.nodes])
    assert any(abs(x.score - y.score) > 1e-4
               for x, y in zip(sorted(ranked, key=lambda s: s.name),
                               sorted(plain, key=lambda s: s.name), strict=True))
    answers, raw = gen.answer("who directed titanic", ctx)
    assert isinstance(answers, list) and isinstance(raw, str)
    with pytest.raises(ValueError, match="embedding model"):
        load_models(None, None, tmp_path / "a", settings)


def test_features_come_from_the_store_where_it_has_them() -> None:
    """KG nodes and relations take the stored vectors; a name outside the KG is embedded."""
    c, by_name, sel = cameron_selected(out_of_candidate="Aliens")
    graph = gp.prompt_graph(c, sel)
    assert graph.ids[graph.nodes.index("James Cameron")] == by_name["James Cameron"].id
    assert graph.ids[graph.nodes.index("aliens")] is None

    class Store:
        asked: list = []

        def entity_vectors(self, ids):
            self.asked += list(ids)
            return {i: np.full(16, 0.5, np.float32) for i in ids}

        def relation_vectors(self, names):
            return {n: np.full(16, -0.5, np.float32) for n in names}

    embedded: list[str] = []

    def embed(texts):
        embedded.extend(texts)
        return EMB.encode(texts)

    x, ei, ea = gp.graph_tensors(graph, embed, Store())
    assert embedded == ["aliens"]  # only the name the store cannot have
    kg_rows = [i for i, kg in enumerate(graph.ids) if kg is not None]
    assert torch.all(x[kg_rows] == 0.5) and torch.all(ea == -0.5)
    plain = gp.graph_tensors(graph, EMB.encode)  # no store: everything embedded
    assert torch.allclose(plain[0][graph.nodes.index("aliens")],
                          x[graph.nodes.index("aliens")])
