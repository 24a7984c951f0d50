"""Ranked decoding: the batched, KV-cached scores equal a plain full-sequence computation;
the set choice; the retriever's and generator's ranked paths on the tiny model."""

from __future__ import annotations

import pytest
import torch

from talent_core.llm.infer import LoadedLM, RetrieverModel, load_models
from talent_core.llm.ranking import Scored, score_continuations, select_top


def _brute_force(model, prompt_ids: list[int], cont: list[int], ends: list[int]) -> float:
    """log p(cont + one of ends | prompt) from ONE forward pass over prompt + cont."""
    ids = torch.tensor([prompt_ids + cont])
    with torch.inference_mode():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
    t = len(prompt_ids)
    total = sum(float(logp[t - 1 + j, c]) for j, c in enumerate(cont))
    return total + float(torch.logsumexp(logp[t - 1 + len(cont), ends], 0))


def test_cached_batched_scores_equal_full_forward(tiny_dir, settings) -> None:
    lm = LoadedLM(str(tiny_dir), {}, settings)
    tok = lm.tokenizer
    prompt = "Question:\nwho directed the movie titanic\n<DESC>\n0,titanic\n</DESC>"
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    names = ["james cameron", "titanic", "1997", "leonardo dicaprio", "j"]
    conts = [tok(n, add_special_tokens=False)["input_ids"] for n in names]
    assert len({len(c) for c in conts}) > 1  # different lengths: padding is exercised
    ends = [tok.eos_token_id, tok("|", add_special_tokens=False)["input_ids"][0]]
    with torch.inference_mode():
        got = score_continuations(lm.model, torch.tensor([prompt_ids]), conts, ends,
                                  tok.pad_token_id, chunk=2)  # several chunks
    want = [_brute_force(lm.model, prompt_ids, c, ends) for c in conts]
    assert got == pytest.approx(want, abs=1e-4)
    # and through LoadedLM.score (tokenises, de-duplicates, keeps the order)
    scored = lm.score(prompt, None, names + ["titanic", ""])
    assert [s.name for s in scored] == names
    assert [s.score for s in scored] == pytest.approx(want, abs=1e-4)


def test_select_top_margin_and_cap() -> None:
    s = [Scored("a", -1.0), Scored("b", -5.0), Scored("c", -1.5), Scored("d", -2.9)]
    assert [x.name for x in select_top(s, margin=2.0)] == ["a", "c", "d"]
    assert [x.name for x in select_top(s, margin=2.0, top_m=2)] == ["a", "c"]
    assert [x.name for x in select_top(s, margin=0.0)] == ["a"]
    assert [x.name for x in select_top(s, margin=100.0, top_m=0)] == ["a"]  # at least one
    assert select_top([], 1.0) == []


def test_ranked_retriever_selects_nodes_of_s(tiny_dir, settings, candidate) -> None:
    lm = LoadedLM(str(tiny_dir), {}, settings)
    retriever = RetrieverModel(lm, None)
    retriever.margin, retriever.top_m = 1e9, 3
    sel = retriever.select(candidate.question, candidate, decode="ranked")
    assert sel.decode == "ranked"
    shown = {n.name.lower() for n in candidate.nodes}
    assert {r.name for r in sel.ranked} == shown  # every node of S scored once
    scores = [r.score for r in sel.ranked]
    assert scores == sorted(scores, reverse=True)
    assert sel.names == [r.name for r in sel.ranked[:3]]  # top_m of the ranking
    assert {n.id for n in sel.selected} <= {n.id for n in candidate.nodes}
    assert sel.out_of_candidate == []


def test_ranked_generator_scores_context_names(tiny_dir, settings, candidate) -> None:
    _, generator = load_models(str(tiny_dir), None, None, settings)
    context = generator.context(candidate.question, candidate, None)
    ranked = generator.rank(candidate.question, context)
    assert {r.name for r in ranked} == {name for _, name in context.nodes}
    only = generator.rank(candidate.question, context, ["james cameron"])
    assert [r.name for r in only] == ["james cameron"]
    full = {r.name: r.score for r in ranked}
    assert only[0].score == pytest.approx(full["james cameron"], abs=1e-4)
