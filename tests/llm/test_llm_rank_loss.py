"""The generator's ranking loss: pure values, the one-pass training score equals the score
ranked decoding computes at inference, and training with it moves the ranking."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_llm import sample_examples

from talent_core.llm.features import generator_features
from talent_core.llm.lm import LoadedLM
from talent_core.llm.loss import ranking_loss, sequence_loss, sft_and_rank_loss
from talent_core.llm.models import read_meta
from talent_core.llm.ranking import continuation_scores
from talent_core.questions import LABELS
from talent_core.training.llm import train_generator
from talent_core.training.trainer import TrainConfig


def test_ranking_loss_values() -> None:
    s = torch.tensor([0.0, math.log(3.0), -50.0])
    # gold = {0}: softmax share of name 0 is 1 / (1 + 3 + ~0) = 0.25
    assert float(ranking_loss(s, torch.tensor([True, False, False]))) == pytest.approx(
        math.log(4.0), abs=1e-6)
    # gold = {0, 1}: share 4 / 4
    assert float(ranking_loss(s, torch.tensor([True, True, False]))) == pytest.approx(
        0.0, abs=1e-6)
    with pytest.raises(ValueError, match="at least one gold"):
        ranking_loss(s, torch.tensor([False, False, False]))
    with pytest.raises(ValueError, match="shape"):
        ranking_loss(s, torch.tensor([True]))


def _features(tok, ex, rank=True):
    return generator_features(tok, ex.question, ex.candidate, None, ex.answers, 4096,
                              rank=rank)


def test_rank_features_are_what_ranked_decoding_scores(tiny_dir, settings) -> None:
    lm = LoadedLM(str(tiny_dir), {}, settings)
    ex = sample_examples(1)[0]  # who directed [Titanic] -> James Cameron
    f = _features(lm.tokenizer, ex)
    r = f.rank
    assert r is not None and r.shared  # the prompt's ids start the training sequence
    assert f.input_ids[: r.head_len] == r.head_ids
    names = [n.name.lower() for n in ex.candidate.nodes]
    assert [lm.tokenizer.decode(c) for c in r.continuations] == names
    assert r.gold == [n == "james cameron" for n in names]
    assert _features(lm.tokenizer, ex, rank=False).rank is None


def test_label_task_rank_features_score_the_labels(tiny_dir, settings) -> None:
    """The label task ranks the two labels at inference (`GeneratorModel.rank`), so its
    ranking loss scores the labels, not the graph's concept names."""
    lm = LoadedLM(str(tiny_dir), {}, settings)
    ex = sample_examples(1)[0]
    for gold in LABELS:
        f = generator_features(lm.tokenizer, "Argument 1: a. Argument 2: b.", ex.candidate,
                               None, [gold], 4096, task="label", rank=True)
        r = f.rank
        assert r is not None and r.shared
        assert [lm.tokenizer.decode(c) for c in r.continuations] == list(LABELS)
        assert r.gold == [label == gold for label in LABELS]


def test_one_pass_loss_equals_inference_scores(tiny_dir, settings) -> None:
    lm = LoadedLM(str(tiny_dir), {}, settings)
    model = lm.model
    model.eval()
    ex = sample_examples(2)[1]  # who starred in [Titanic] -> Leonardo DiCaprio
    f = _features(lm.tokenizer, ex)
    r = f.rank
    ids = torch.tensor([f.input_ids])
    w = torch.tensor([f.weights])
    with torch.no_grad():
        total, rank = sft_and_rank_loss(model, ids, w, r.head_len, r.continuations, r.gold,
                                        r.end_ids, rank_weight=2.0)
        sft = sequence_loss(model, ids, w)[0]
        scores = continuation_scores(model, torch.tensor([r.head_ids]), r.continuations,
                                     r.end_ids)
    want = ranking_loss(scores, torch.tensor(r.gold))
    assert float(rank) == pytest.approx(float(want), abs=1e-4)
    assert float(total) == pytest.approx(float(sft) + 2.0 * float(want), abs=1e-3)
    # no gold among the names: the SFT term alone
    none = [False] * len(r.gold)
    with torch.no_grad():
        only, no_rank = sft_and_rank_loss(model, ids, w, r.head_len, r.continuations, none,
                                          r.end_ids)
    assert no_rank is None and float(only) == pytest.approx(float(sft), abs=1e-4)
    with pytest.raises(ValueError, match="weighted tokens"):
        sft_and_rank_loss(model, ids, w, len(f.input_ids) - 1, r.continuations, r.gold,
                          r.end_ids)


def _train_full(lm: LoadedLM, features, rank_weight: float, steps: int) -> list[float]:
    """Plain Adam on every parameter of a fresh copy of the tiny model; the ranking loss of
    each example after training (as ranked decoding would score it)."""
    import copy

    model = copy.deepcopy(lm.model)
    model.train()
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    torch.manual_seed(0)
    for _ in range(steps):
        for f in features:
            r = f.rank
            loss, _ = sft_and_rank_loss(model, torch.tensor([f.input_ids]),
                                        torch.tensor([f.weights]), r.head_len, r.continuations,
                                        r.gold, r.end_ids, rank_weight=rank_weight)
            loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    out = []
    with torch.no_grad():
        for f in features:
            r = f.rank
            s = continuation_scores(model, torch.tensor([r.head_ids]), r.continuations,
                                    r.end_ids)
            out.append(float(ranking_loss(s, torch.tensor(r.gold))))
    return out


def test_the_ranking_loss_trains_the_ranking(tiny_dir, settings) -> None:
    lm = LoadedLM(str(tiny_dir), {}, settings)
    features = [_features(lm.tokenizer, ex) for ex in sample_examples(3)]
    sft_only = _train_full(lm, features, 0.0, 12)
    ranked = _train_full(lm, features, 5.0, 12)
    # the same 12 steps: with the ranking term every question puts more of the softmax on
    # its gold name than with eq. 15 alone (measured: 0.31 / 14.5 / 1.35 nats against
    # 5.29 / 19.7 / 2.71), and clearly so on average
    assert all(r < s for r, s in zip(ranked, sft_only, strict=True)), (ranked, sft_only)
    assert sum(ranked) < 0.75 * sum(sft_only), (ranked, sft_only)


def test_the_trainer_uses_the_ranking_loss(tiny_dir, settings, tmp_path) -> None:
    """The first logged loss (before any update; LoRA starts as the identity, no dropout) is
    eq. 15 + rank_weight x the ranking loss of the base model."""
    ex = sample_examples(1)
    lm = LoadedLM(str(tiny_dir), {}, settings)
    f = _features(lm.tokenizer, ex[0])
    r = f.rank
    with torch.no_grad():
        sft, rank = sft_and_rank_loss(lm.model, torch.tensor([f.input_ids]),
                                      torch.tensor([f.weights]), r.head_len, r.continuations,
                                      r.gold, r.end_ids, rank_weight=0.0)
        _, rank = sft_and_rank_loss(lm.model, torch.tensor([f.input_ids]),
                                    torch.tensor([f.weights]), r.head_len, r.continuations,
                                    r.gold, r.end_ids)
    first = {}
    for rw in (0.0, 3.0):
        cfg = TrainConfig(output_dir=tmp_path / f"g{rw}", base_model=str(tiny_dir),
                          max_steps=1, grad_accum=1, lora_dropout=0.0, save_every=0,
                          progress=False, rank_weight=rw)
        meta = train_generator(ex, cfg, None, source="none", settings=settings)
        first[rw] = meta.metrics["history"][0]["loss"]
        assert read_meta(tmp_path / f"g{rw}").train["rank_weight"] == rw
    assert first[0.0] == pytest.approx(float(sft), rel=1e-4)
    assert first[3.0] == pytest.approx(float(sft) + 3.0 * float(rank), rel=1e-4)


def test_rank_weight_refused_for_the_graph_prompt(tiny_dir, settings, tmp_path) -> None:
    cfg = TrainConfig(output_dir=tmp_path / "g", base_model=str(tiny_dir), graph_prompt=True,
                      rank_weight=1.0, progress=False)
    with pytest.raises(ValueError, match="graph-prompt"):
        train_generator(sample_examples(1), cfg, None, source="none", settings=settings)
