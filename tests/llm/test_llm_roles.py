from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_llm import tiny_adapters

from talent_core.llm.generator import GeneratorModel
from talent_core.llm.lm import LoadedLM
from talent_core.llm.loading import load_models
from talent_core.llm.retriever import RetrieverModel
from talent_core.models import Selection


@pytest.fixture(scope="module")
def adapters(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A retriever and a generator adapter with non-zero LoRA weights on the tiny model."""
    return tiny_adapters(tiny_dir, tmp_path_factory.mktemp("adapters"),
                         tmp_path_factory.mktemp("cache"), seed=10, std=1.0)


def test_select_and_answer_with_tiny_model(tiny_dir, settings, adapters, candidate) -> None:
    retriever, generator = load_models(None, adapters["retriever"], adapters["generator"],
                                       settings)
    assert retriever.lm is generator.lm  # one base model, two adapters
    assert retriever.lm.base_name == str(tiny_dir)  # taken from the adapters' metadata
    assert retriever.max_length == 2048
    retriever.max_new_tokens = 12
    sel = retriever.select(candidate.question, candidate, lookup=lambda names: {})
    assert isinstance(sel, Selection) and isinstance(sel.raw, str)
    from talent_core.llm.parsing import parse_names

    assert sel.names == parse_names(sel.raw, sel.truncated)
    gen = retriever.lm.generate(retriever.prompt(candidate.question, candidate)[0].prompt,
                                "retriever", 12)
    assert gen.text == sel.raw and gen.new_tokens <= 12
    assert {n.id for n in sel.selected} <= {n.id for n in candidate.nodes}
    generator.max_new_tokens = 12
    context = generator.context(candidate.question, candidate, sel)
    answers, raw = generator.answer(candidate.question, context)
    assert isinstance(answers, list) and all(isinstance(a, str) for a in answers)
    assert isinstance(raw, str)


def test_frozen_retriever_is_the_base_model(tiny_dir, settings, adapters, candidate) -> None:
    with_adapter = LoadedLM(str(tiny_dir), {"retriever": adapters["retriever"]}, settings)
    plain = LoadedLM(str(tiny_dir), {}, settings)
    prompt = RetrieverModel(plain, None).prompt(candidate.question, candidate)[0].prompt
    frozen = with_adapter.generate(prompt, None, 10)
    base = plain.generate(prompt, None, 10)
    tuned = with_adapter.generate(prompt, "retriever", 10)
    assert frozen == base
    ids = plain.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        tuned_logits = with_adapter.model(input_ids=ids).logits
        base_logits = plain.model(input_ids=ids).logits
    assert not torch.allclose(tuned_logits, base_logits)
    assert tuned.prompt_tokens == base.prompt_tokens == ids.shape[1]
    with pytest.raises(KeyError, match="generator"):
        with_adapter.generate(prompt, "generator", 4)


def test_select_maps_output_and_grounds(tiny_dir, settings, candidate, monkeypatch) -> None:
    lm = LoadedLM(str(tiny_dir), {}, settings)
    from talent_core.llm.lm import Generation

    seen: dict[str, str] = {}

    def fake_generate(prompt: str, adapter, max_new_tokens: int, chat=("", "")) -> Generation:
        seen["prompt"] = prompt
        return Generation("Output: james cameron|titanic|kate winslet|atlantis|unknown", False,
                          10, 5)

    monkeypatch.setattr(lm, "generate", fake_generate)
    sel = RetrieverModel(lm, None).select(candidate.question, candidate,
                                          lookup=lambda names: {"kate winslet": "kg:kw"})
    assert "<DESC>\nnode_id,node_attr\n0,titanic\n" in seen["prompt"]
    assert [n.id for n in sel.selected] == ["p:cameron", "m:titanic"]
    assert [(o.name, o.grounded, o.id) for o in sel.out_of_candidate] == [
        ("kate winslet", True, "kg:kw"), ("atlantis", False, None)]
    gen = GeneratorModel(lm, None)
    ctx = gen.context(candidate.question, candidate, sel)
    assert ("na1", "kate winslet") in ctx.nodes and ("na2", "atlantis") in ctx.nodes
    assert {e.rel for e in ctx.kg_edges} == {"directed_by", "starred_actors", "release_year"}


def test_prompt_budget_truncates_s(tiny_dir, settings, candidate) -> None:
    lm = LoadedLM(str(tiny_dir), {}, settings)
    full = RetrieverModel(lm, None, max_new_tokens=10, max_length=100_000)
    rendered, view = full.prompt(candidate.question, candidate)
    n = lm.count_tokens(rendered.prompt)
    small = RetrieverModel(lm, None, max_new_tokens=10, max_length=n + 10 - 20)
    rendered2, view2 = small.prompt(candidate.question, candidate)
    assert lm.count_tokens(rendered2.prompt) <= n - 20
    assert view2.dropped_nodes > 0 and view.dropped_nodes == 0
    assert candidate.question in rendered2.prompt


def test_label_task_answer(tiny_dir, settings, candidate, monkeypatch) -> None:
    from talent_core.llm.lm import Generation

    lm = LoadedLM(str(tiny_dir), {}, settings)
    monkeypatch.setattr(lm, "generate",
                        lambda p, a, m, prefix=None, chat=None: Generation("Counter.", False, 1, 1))
    gen = GeneratorModel(lm, None, task="label")
    ctx = gen.context("Argument 1: x\nArgument 2: y", candidate, None)
    assert gen.answer("Argument 1: x\nArgument 2: y", ctx) == (["counter"], "Counter.")


def test_loading_reports_its_stages(tiny_dir, settings, adapters) -> None:
    """The UI's model-load bar is fed by the real stages: base model, each adapter, done."""
    seen: list[tuple[str, int, int]] = []
    load_models(None, adapters["retriever"], adapters["generator"], settings,
                on_stage=lambda what, done, total: seen.append((what, done, total)))
    assert [(d, t) for _, d, t in seen] == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert seen[0][0].startswith("base model") and seen[1][0] == "retriever adapter"
    assert seen[2][0] == "generator adapter" and seen[3][0] == "done"
