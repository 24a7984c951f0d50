"""The one ExplaGraphs split (bench/explagraphs_split.json): disjoint parts, the held-out
part covers the 100 rows of the frozen figure and has >= 400 ids, and (with the data) it is
what bench/explagraphs_split.py draws; the pseudo-gold path rule."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from talent_core.llm.explagraphs import ExplaGraphsRecord, content_words, path_gold

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ROOT / "bench" / "explagraphs_split.json"
FROZEN = ROOT / "bench" / "results" / "explagraphs_frozen.json"
DATA = ROOT.parent / "shared" / "data" / "explagraphs" / "train_dev_sample.tsv"


def test_split_is_disjoint_and_holds_out_the_old_rows() -> None:
    split = json.loads(SPLIT.read_text())
    parts = {k: split[k] for k in ("train", "validation", "held_out")}
    for k, ids in parts.items():
        assert len(ids) == len(set(ids)) == split["sizes"][k]
    train, val, held = (set(parts[k]) for k in ("train", "validation", "held_out"))
    assert not (train & val) and not (train & held) and not (val & held)
    assert len(held) >= 400 and 150 <= len(val) <= 200
    old = json.loads(FROZEN.read_text())["rows"]["ids"]
    assert len(old) == 100 and set(old) <= held


def test_split_is_what_the_script_draws() -> None:
    if not DATA.is_file():
        pytest.skip("../shared/data is absent")
    from talent_core.llm.explagraphs import read_explagraphs

    spec = importlib.util.spec_from_file_location("eg_split", ROOT / "bench" /
                                                  "explagraphs_split.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    split = json.loads(SPLIT.read_text())
    records = read_explagraphs(DATA)
    old = json.loads(FROZEN.read_text())["rows"]["ids"]
    again = mod.make_split(records, old, split["sizes"]["held_out"] - len(old),
                           split["sizes"]["validation"])
    assert again == {k: split[k] for k in ("train", "validation", "held_out")}
    assert sum(split["sizes"].values()) == len({r.id for r in records})


def test_path_gold_links_the_arguments_concepts() -> None:
    rec = ExplaGraphsRecord(
        arg1="Women should not be in combat.", arg2="Women and men have the same rights.",
        label="counter",
        triples=[("women and men", "is a", "citizens"), ("citizens", "causes", "rights"),
                 ("rights", "causes", "women"), ("women", "capable of", "combat"),
                 ("unrelated", "is a", "thing")])
    assert content_words("Women's rights!") == {"women", "right"}
    gold = path_gold(rec)
    # "combat" (arg 1 only) to "rights" / "women and men" (arg 2 only), through "women"
    assert gold.rule == "path"
    assert gold.nodes == ["women and men", "rights", "women", "combat"]
    none = ExplaGraphsRecord(arg1="x y z", arg2="q r s", label="support",
                             triples=[("alpha", "r", "beta")])
    assert path_gold(none).rule == "all" and path_gold(none).nodes == ["alpha", "beta"]
