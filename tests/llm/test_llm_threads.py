"""Torch threads per forward pass, from the free cores (talent_core.llm.threads)."""

from __future__ import annotations

import pytest
import torch

from talent_core.llm import lm as lm_module
from talent_core.llm.threads import threads_for_call, torch_threads


@pytest.mark.parametrize(("free", "configured", "want"), [
    (2, 2, 2),    # a quiet 2-core machine: all of them
    (1, 2, 1),    # another process busy on one core
    (0, 2, 1),    # both busy: at least one
    (16, 4, 4),   # never more than configured (OMP_NUM_THREADS, torch.set_num_threads)
    (3, 1, 1),    # OMP_NUM_THREADS=1 stays 1
])
def test_threads_for_call(free, configured, want) -> None:
    assert threads_for_call(free, configured) == want


def test_torch_threads_sets_and_restores() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch_threads(free=1) as n:
            assert n == 1 and torch.get_num_threads() == 1
            with torch_threads(free=2) as inner:  # nested: the outer choice stays
                assert inner == 1 and torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), torch_threads(free=1):
            raise RuntimeError("a failing forward pass")
        assert torch.get_num_threads() == 2  # restored after an error too
    finally:
        torch.set_num_threads(before)


def test_the_model_stages_run_under_the_chosen_threads(tiny_dir, settings, monkeypatch):
    """`LoadedLM.score` (the retriever's and generator's forward passes) runs with the
    threads `free_cores` allows, and torch's count is back afterwards."""
    from talent_core.llm import threads

    seen: list[int] = []
    real = lm_module.scores_with_prompt

    def spy(*a, **k):
        seen.append(torch.get_num_threads())
        return real(*a, **k)

    monkeypatch.setattr(lm_module, "scores_with_prompt", spy)
    monkeypatch.setattr(threads, "free_cores", lambda: 1)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        lm = lm_module.LoadedLM(str(tiny_dir), {}, settings)
        out = lm.score("who directed titanic", None, ["james cameron", "1997"])
        assert len(out) == 2
        assert seen == [1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
