"""Ranked decoding: the batched, KV-cached scores equal a plain full-sequence computation;
the set choice; the retriever's and generator's ranked paths on the tiny model."""

from __future__ import annotations

import pytest
import torch

from talent_core.llm.lm import LoadedLM
from talent_core.llm.loading import load_models
from talent_core.llm.ranking import (
    Scored,
    continuation_scores,
    prompt_pass,
    scores_over_cache,
    scores_with_prompt,
    select_top,
)
from talent_core.llm.retriever import RetrieverModel


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
    assert len({len(c) for c in conts}) > 1  # different lengths packed into one pass
    ends = [tok.eos_token_id, tok("|", add_special_tokens=False)["input_ids"][0]]
    with torch.inference_mode():
        got = continuation_scores(lm.model, torch.tensor([prompt_ids]), conts, ends,
                                  chunk=2).tolist()  # several packed passes
        alone = [float(continuation_scores(lm.model, torch.tensor([prompt_ids]), [c], ends)[0])
                 for c in conts]
        together = continuation_scores(lm.model, torch.tensor([prompt_ids]), conts,
                                       ends).tolist()
    want = [_brute_force(lm.model, prompt_ids, c, ends) for c in conts]
    assert got == pytest.approx(want, abs=1e-4)
    # a name's score does not depend on the names packed beside it
    assert together == pytest.approx(alone, abs=1e-4)
    # and through LoadedLM.score (tokenises, de-duplicates, keeps the order)
    scored = lm.score(prompt, None, names + ["titanic", ""])
    assert [s.name for s in scored] == names
    assert [s.score for s in scored] == pytest.approx(want, abs=1e-4)


def test_prompt_and_names_in_one_pass_equal_full_forward(tiny_dir, settings) -> None:
    """`scores_with_prompt`: the prompt and the packed names in one pass (from scratch, or
    after the cache of the prompt's head; more names than one chunk) score as a plain
    full-sequence computation; the cache it returns is the prompt's."""
    lm = LoadedLM(str(tiny_dir), {}, settings)
    tok = lm.tokenizer
    prompt = "Question:\nwho directed the movie titanic\n<DESC>\n0,titanic\n</DESC>"
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    head_ids = tok("Question:\nwho", add_special_tokens=False)["input_ids"]
    names = ["james cameron", "titanic", "1997", "leonardo dicaprio", "j"]
    conts = [tok(n, add_special_tokens=False)["input_ids"] for n in names]
    ends = [tok.eos_token_id, tok("|", add_special_tokens=False)["input_ids"][0]]
    want = [_brute_force(lm.model, prompt_ids, c, ends) for c in conts]
    k = len(head_ids)
    assert 0 < k < len(prompt_ids) and prompt_ids[:k] == head_ids
    with torch.inference_mode():
        _, cached, _ = prompt_pass(lm.model, torch.tensor([head_ids]))
        for past, chunk in ((None, 64), ((cached, k), 64), ((cached, k), 2)):
            got, first, layers, t = scores_with_prompt(
                lm.model, torch.tensor([prompt_ids]), conts, ends, past=past, chunk=chunk)
            assert got.tolist() == pytest.approx(want, abs=1e-4)
            assert t == len(prompt_ids) and layers[0][0].shape[2] == t
            again = scores_over_cache(lm.model, first, layers, t, conts, ends)
            assert again.tolist() == pytest.approx(want, abs=1e-4)


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


def test_tune_curve_and_choices() -> None:
    from talent_core.training.tune import choose_answer_margin, choose_retriever, curve, set_scores

    # q1: gold ranked 2nd of 4; q2: gold first; q3: no gold in S
    q1 = [(-1.0, False), (-1.5, True), (-6.0, False), (-9.0, False)]
    q2 = [(-0.5, True), (-3.0, False)]
    q3 = [(-2.0, False), (-2.1, False)]
    assert set_scores(q1, 1, margin=0.2, top_m=None) == {
        "hit": 0.0, "recall": 0.0, "precision": 0.0, "f1": 0.0, "size": 1.0}
    s = set_scores(q1, 1, margin=1.0, top_m=None)
    assert s["hit"] == 1.0 and s["size"] == 2.0 and s["precision"] == 0.5
    pts = curve([q1, q2, q3], [1, 1, 1], margins=(0.2, 1.0, 100.0), top_ms=(1, None))
    assert len(pts) == 6
    s_hit = 2 / 3
    best = choose_retriever(pts, s_hit, coverage=1.0)
    # the smallest sets that keep both hits: margin 1.0 (sizes 2, 1, 2)
    assert (best["margin"], best["top_m"]) == (1.0, None) and best["hit"] == s_hit
    assert best["size"] == pytest.approx(5 / 3)
    g = choose_answer_margin([p for p in pts if p["top_m"] is None])
    assert g["margin"] == 1.0  # best F1: q2 exact, q1 half-precision


def test_cli_tune_ranking_writes_metadata(tiny_dir, tmp_path) -> None:
    import json

    from tiny_llm import sample_candidate
    from typer.testing import CliRunner

    from talent_core.commands import app
    from talent_core.llm.data import TrainingExample, write_examples
    from talent_core.llm.models import (
        add_lora,
        load_base,
        lora_config,
        meta_for,
        read_meta,
        save_adapter,
    )

    dirs = {}
    for kind in ("retriever", "generator"):
        model, _, _ = load_base(str(tiny_dir))
        model = add_lora(model, lora_config())
        dirs[kind] = save_adapter(model, tmp_path / kind, meta_for(model, kind))
    c = sample_candidate()
    val = tmp_path / "val.jsonl"
    write_examples(val, [TrainingExample(question=c.question, candidate=c,
                                         answers=["James Cameron"])] * 2)
    r = CliRunner().invoke(app, ["train", "tune-ranking", str(val), "--retriever",
                                 str(dirs["retriever"]), "--generator", str(dirs["generator"]),
                                 "--report", str(tmp_path / "curves.json")])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["s_hit"] == 1.0
    for kind in ("retriever", "generator"):
        meta = read_meta(dirs[kind])
        assert set(meta.ranking) == {"margin", "top_m"}
        assert meta.metrics["ranking_val"]["n"] == 2
    assert json.loads((tmp_path / "curves.json").read_text())["retriever_curve"]
