"""Merged adapters for inference (`llm.merged`): the same scores and completions as peft's
unmerged LoRA, the base weights untouched, other adapters and the frozen model unchanged,
least recently used merges dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from talent_core.llm.lm import LoadedLM
from talent_core.llm.models import add_lora, load_base, lora_config, meta_for, save_adapter
from talent_core.llm.ranking import continuation_scores, scoring_inputs

PROMPT = "Question:\nwho directed the movie titanic\n<DESC>\n0,titanic\n</DESC>"
NAMES = ["james cameron", "titanic", "1997", "leonardo dicaprio"]


def _adapter(tiny_dir: Path, settings, out: Path, seed: int, targets: str) -> Path:
    model, _, _ = load_base(str(tiny_dir), settings)
    model = add_lora(model, lora_config(targets=targets))
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # LoRA B starts at zero: make the adapter do something
    meta = meta_for(model, "generator", lam=0.0, eos_weight=1.0, k=10, hops=2,
                    dataset="metaqa", seed=seed, metrics={})
    return save_adapter(model, out, meta)


@pytest.fixture
def adapters(tiny_dir, settings, tmp_path) -> dict[str, Path]:
    return {"a": _adapter(tiny_dir, settings, tmp_path / "a", 1, "all-linear"),
            "b": _adapter(tiny_dir, settings, tmp_path / "b", 2, "q_proj,v_proj")}


def _scores(lm: LoadedLM, adapter: str | None) -> list[float]:
    return [s.score for s in lm.score(PROMPT, adapter, NAMES)]


def _base_weights(lm: LoadedLM) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in lm.model.named_parameters() if "lora_" not in n}


def test_merged_equals_unmerged(tiny_dir, settings, adapters) -> None:
    unmerged = LoadedLM(str(tiny_dir), adapters, settings.model_copy(update={"merged_adapters": 0}))
    lm = LoadedLM(str(tiny_dir), adapters, settings)
    assert lm.merge_capacity == 2
    before = _base_weights(lm)
    for adapter in ("a", "b", None, "a"):
        want = _scores(unmerged, adapter)
        assert _scores(lm, adapter) == pytest.approx(want, abs=1e-4)
    assert _scores(lm, "a") != pytest.approx(_scores(lm, None), abs=1e-2)  # the adapter acts
    # the frozen model: what peft's own disable_adapter() gives
    inputs = scoring_inputs(lm.tokenizer, PROMPT, NAMES)
    with lm.model.disable_adapter(), torch.inference_mode():
        frozen = continuation_scores(lm.model, torch.tensor([inputs.prompt_ids]),
                                     inputs.continuations, inputs.end_ids).tolist()
    assert _scores(lm, None) == pytest.approx(frozen, abs=1e-5)
    assert list(lm._merged) == ["b", "a"]  # both merged, "a" used last
    for name, w in _base_weights(lm).items():  # the swap put every base weight back
        assert torch.equal(w, before[name]), name
    # greedy completions: the same text through the merged weights
    assert (lm.generate(PROMPT, "b", max_new_tokens=6).text
            == unmerged.generate(PROMPT, "b", max_new_tokens=6).text)


def test_least_recently_used_merge_is_dropped(tiny_dir, settings, adapters) -> None:
    lm = LoadedLM(str(tiny_dir), adapters, settings.model_copy(update={"merged_adapters": 1}))
    _scores(lm, "a")
    assert list(lm._merged) == ["a"]
    _scores(lm, "b")
    assert list(lm._merged) == ["b"]
    unmerged = LoadedLM(str(tiny_dir), adapters, settings.model_copy(update={"merged_adapters": 0}))
    for model in (lm, unmerged):  # reloaded under the same name: merged again on use
        model.add_adapter("b", adapters["a"])
    assert not lm._merged
    assert _scores(lm, "b") == pytest.approx(_scores(unmerged, "b"), abs=1e-4)
    assert list(lm._merged) == ["b"]


def test_the_prompt_head_is_cached_once_and_scores_stay_the_same(tiny_dir, settings,
                                                                 adapters) -> None:
    """A prompt's fixed head runs once per adapter; the rest runs on its cache: the scores
    equal a computation without the head, and a prompt scores exactly the same whatever
    was scored before it; a head the prompt does not start with is not used."""
    head = "Question:\nwho"
    other = PROMPT.replace("titanic\n<DESC>", "avatar\n<DESC>")
    lm = LoadedLM(str(tiny_dir), adapters, settings)
    for adapter in ("a", None):
        want = _scores(lm, adapter)  # no head
        first = [s.score for s in lm.score(PROMPT, adapter, NAMES, head=head)]
        assert first == pytest.approx(want, abs=1e-4)
        lm.score(other, adapter, NAMES, head=head)
        assert [s.score for s in lm.score(PROMPT, adapter, NAMES, head=head)] == first
        unrelated = [s.score for s in lm.score(PROMPT, adapter, NAMES, head="Answer:")]
        assert unrelated == _scores(lm, adapter)  # not the prompt's start: no cache used
    assert set(lm._heads) == {("a", head), (None, head), ("a", "Answer:"), (None, "Answer:")}


def test_the_frozen_model_stays_frozen_when_an_adapter_adds_lora_layers(
        tiny_dir, settings, adapters) -> None:
    """The frozen model's list of LoRA layers to switch off is kept between calls and made
    again when an adapter is added: one adapting other modules brings new LoRA layers (run
    unmerged here, so that peft's active adapter is the added one when the frozen model
    runs next)."""
    lm = LoadedLM(str(tiny_dir), {"b": adapters["b"]},  # q_proj, v_proj only
                  settings.model_copy(update={"merged_adapters": 0}))
    before = _scores(lm, None)
    assert lm._frozen is not None
    kept = lm._frozen
    _scores(lm, None)
    assert lm._frozen is kept  # not walked again
    lm.add_adapter("a", adapters["a"])  # all-linear: LoRA layers on modules "b" left alone
    assert _scores(lm, "a") != pytest.approx(before, abs=1e-2)  # "a" active in peft now
    assert _scores(lm, None) == pytest.approx(before, abs=1e-5)
