from __future__ import annotations

import math

import pytest
import torch

from talent_core.llm.features import encode_weighted, generator_features, retriever_features
from talent_core.llm.loss import align_weights, sequence_loss, weighted_nll
from talent_core.llm.prompts import retriever_prompt
from talent_core.llm.targets import join_names, retriever_target
from talent_core.llm.textualise import textualise
from talent_core.models import Candidate, CandidateNode

LAM = 0.01


def test_align_weights_pure() -> None:
    # text: "ab|cd|ef" with spans ab (1.0), cd (0.5), ef (0.25); EOS at 8..10
    spans = [(0, 2, 1.0), (3, 5, 0.5), (6, 8, 0.25), (8, 10, 0.7)]
    offsets = [(0, 1), (1, 2), (2, 3), (3, 5), (5, 7), (7, 8), (8, 10), (10, 10)]
    # "|" alone -> 0; "|e" straddles separator and ef -> ef's weight; zero-width -> 0
    assert align_weights(offsets, spans) == [1.0, 1.0, 0.0, 0.5, 0.25, 0.25, 0.7, 0.0]
    # a token covering the end of one name and the start of the next takes the larger weight
    assert align_weights([(1, 4)], spans) == [1.0]
    assert align_weights([(4, 7)], spans) == [0.5]


def test_weighted_nll_hand_computation() -> None:
    logits = torch.tensor([[[2.0, 0.0, -1.0], [0.5, 0.5, 0.0], [0.0, 1.0, 3.0]],
                           [[1.0, 1.0, 1.0], [0.0, -2.0, 2.0], [4.0, 0.0, 0.0]]])
    labels = torch.tensor([[0, 2, 1], [1, 2, 0]])
    weights = torch.tensor([[1.0, LAM, 0.0], [0.0, 1.0, 1.0]])

    def logp(row: list[float], y: int) -> float:
        return row[y] - math.log(sum(math.exp(v) for v in row))

    ex0 = -(1.0 * logp([2.0, 0.0, -1.0], 0) + LAM * logp([0.5, 0.5, 0.0], 2))
    ex1 = -(1.0 * logp([0.0, -2.0, 2.0], 2) + 1.0 * logp([4.0, 0.0, 0.0], 0))
    mean, per_example = weighted_nll(logits, labels, weights)
    assert per_example.tolist() == pytest.approx([ex0, ex1], rel=1e-6)
    assert float(mean) == pytest.approx((ex0 + ex1) / 2, rel=1e-6)  # mean over the batch


def test_weighted_nll_all_zero_weights_is_zero_with_grad() -> None:
    logits = torch.randn(1, 4, 5, requires_grad=True)
    mean, _ = weighted_nll(logits, torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4))
    mean.backward()
    assert float(mean.detach()) == 0.0 and logits.grad is not None


def test_sequence_loss_matches_full_logits(tiny_dir, candidate) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    ids = torch.randint(3, 300, (2, 12))
    weights = torch.zeros(2, 12)
    weights[0, 7:] = torch.tensor([1.0, 1.0, LAM, 0.0, 1.0])
    weights[1, 9:] = torch.tensor([LAM, 1.0, 0.5])
    with torch.no_grad():
        mean, per_example = sequence_loss(model, ids, weights)
        full = model(input_ids=ids).logits
    logp = torch.log_softmax(full[:, :-1].double(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    expected = -(logp * weights[:, 1:].double()).sum(1)
    assert per_example.double().tolist() == pytest.approx(expected.tolist(), rel=1e-5)
    assert float(mean) == pytest.approx(float(expected.mean()), rel=1e-5)


def _weighted_chars(tok, text: str, ids: list[int], weights: list[float]) -> dict[float, str]:
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    assert enc["input_ids"] == ids
    out: dict[float, str] = {}
    for (s, e), w in zip(enc["offset_mapping"], weights, strict=True):
        out[w] = out.get(w, "") + text[s:e]
    return out


def test_weights_land_on_name_tokens(tiny_tok, candidate) -> None:
    rendered = retriever_prompt(tiny_tok, candidate.question, textualise(candidate))
    target = retriever_target(candidate, ["James Cameron"])
    ids, weights, n_prompt = encode_weighted(tiny_tok, rendered, target, LAM, 0.7)
    text = rendered.prompt + target.text + tiny_tok.eos_token
    by_weight = _weighted_chars(tiny_tok, text, ids, weights)
    # multi-token name, every token weighted, and the separator after it carries its weight
    # (continuing the list after a gold name is learnt: issue 8's one-name collapse)
    assert by_weight[1.0] == "james cameron|"
    assert by_weight[LAM] == "titanic|leonardo dicaprio|1997|avatar|english"
    assert by_weight[0.7] == tiny_tok.eos_token
    assert set(by_weight) == {0.0, 1.0, LAM, 0.7}
    # the prompt has weight 0; the last name is followed by EOS, not a separator
    assert all(w == 0.0 for w in weights[:n_prompt])
    assert by_weight[0.0].endswith("<|im_start|>assistant\n")
    assert sum(1 for w in weights if w == 1.0) > 1  # james cameron is several tokens


def test_in_context_tokenisation(tiny_tok) -> None:
    """'(500) days of summer' tokenises differently after '|' ('|(' is one token): the
    weights follow the in-context tokens, so the straddling token gets the name's weight."""
    cand = Candidate(question="q", nodes=[CandidateNode(id="a", name="Titanic"),
                                         CandidateNode(id="b", name="(500) Days of Summer")])
    alone = tiny_tok("(500) days of summer", add_special_tokens=False)["input_ids"]
    rendered = retriever_prompt(tiny_tok, "q", textualise(cand))
    target = retriever_target(cand, ["titanic"])  # P = titanic, W = (500) days of summer
    assert target.text == "titanic|(500) days of summer"
    ids, weights, _ = encode_weighted(tiny_tok, rendered, target, LAM, 1.0)
    text = rendered.prompt + target.text + tiny_tok.eos_token
    enc = tiny_tok(text, add_special_tokens=False, return_offsets_mapping=True)
    toks = tiny_tok.convert_ids_to_tokens(ids)
    straddle = toks.index("|(", len(toks) - 20)
    # covers titanic's separator (weight 1) AND the weak name's "(" (lambda): the max wins
    assert weights[straddle] == 1.0
    name_start = text.index("(500) days of summer<")
    in_context = [i for i, (s, e) in zip(ids, enc["offset_mapping"], strict=True)
                  if s < len(text) - len(tiny_tok.eos_token) and e > name_start]
    assert tiny_tok.convert_ids_to_tokens(in_context[:1]) == ["|("]
    assert tiny_tok.convert_ids_to_tokens(alone[:1]) == ["("]
    assert in_context[1:] == alone[1:]
    covered = "".join(text[max(s, name_start):e] for (s, e), w in
                      zip(enc["offset_mapping"], weights, strict=True)
                      if w > 0 and e > name_start and s < len(text) - len(tiny_tok.eos_token))
    assert covered == "(500) days of summer"  # every character of the name is weighted
    assert weights[toks.index("titanic", len(toks) - 20)] == 1.0


def test_retriever_features_truncate_rows_not_question(tiny_tok) -> None:
    nodes = [CandidateNode(id=f"n{i}", name=f"movie number {i}", prize=float(-i))
             for i in range(60)]
    cand = Candidate(question="which movie is number seven", nodes=nodes)
    full = retriever_features(tiny_tok, cand.question, cand, ["movie number 7"], LAM, 1.0,
                              max_length=100_000)
    assert full.dropped_nodes == 0 and full.positives == 1
    budget = len(full) // 2
    cut = retriever_features(tiny_tok, cand.question, cand, ["movie number 7"], LAM, 1.0,
                             max_length=budget)
    assert len(cut) <= budget and cut.dropped_nodes > 0
    prompt = tiny_tok.decode(cut.input_ids)
    assert "which movie is number seven" in prompt and "Nothing else." in prompt
    # the target names exactly the kept rows (highest prize first: n0, n1, ...)
    kept = cut.target.split("|")
    assert kept[0] == "movie number 7" and len(kept) == 60 - cut.dropped_nodes
    for name in kept:
        assert f",{name}\n" in prompt


def test_generator_features_weight_whole_answer(tiny_tok, candidate) -> None:
    f = generator_features(tiny_tok, candidate.question, candidate, None,
                           ["James Cameron", "Avatar"], 100_000)
    text = tiny_tok.decode(f.input_ids)
    enc = tiny_tok(text, add_special_tokens=False, return_offsets_mapping=True)
    weighted = "".join(text[s:e] for (s, e), w in
                       zip(enc["offset_mapping"], f.weights, strict=True) if w)
    assert weighted == "james cameron|avatar" + tiny_tok.eos_token  # separators included
    assert set(f.weights) == {0.0, 1.0}


def test_join_names_spans() -> None:
    t = join_names([("A b", "P"), ("a  B", "W"), ("c", "W")])
    assert t.text == "a b|c" and [(s.start, s.end, s.cls) for s in t.spans] == [
        (0, 3, "P"), (4, 5, "W")]
