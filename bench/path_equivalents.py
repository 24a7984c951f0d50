"""How many of a matcher's WebQSP validation misses pick a relation the training labels
themselves treat as interchangeable with the gold one (issue 45's path accuracy counts
them wrong):

    python bench/path_equivalents.py --planner DIR -o bench/results/JSON

Two relations are interchangeable here when both are one-relation label paths (a ground
path or the annotators' chain) of the same training question in at least ``--min`` training
questions: Freebase's reverse properties (`location.country.currency_used` /
`finance.currency.countries_used`) and near-synonyms the labels mix (`official_language` /
`languages_spoken`). Read from the split "train" only; a diagnostic, not a second metric.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from pathlib import Path

import numpy as np

from talent_core.planning.matcher import load_matcher, path_words
from talent_core.training.matcher import metaqa_pairs, metaqa_qtypes, webqsp_pairs
from talent_core.training.path_labels import read_path_labels


def interchangeable(records, least: int) -> dict[str, set[str]]:
    """relation -> the relations that are one-relation labels beside it in >= least records."""
    seen: Counter = Counter()
    for r in records:
        ones = {p[0] for p in r.ground_paths if len(p) == 1}
        ones |= set(r.inferential_chain) if len(r.inferential_chain) == 1 else set()
        seen.update(itertools.combinations(sorted(ones), 2))
    out: dict[str, set[str]] = {}
    for (a, b), n in seen.items():
        if n >= least:
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--planner", required=True)
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--split", type=Path, default=Path(".talent/exp2"))
    ap.add_argument("--min", type=int, default=2)
    ap.add_argument("-o", "--output", type=Path, required=True)
    a = ap.parse_args()
    recs = read_path_labels(a.shared / "webqsp-train" / "train.jsonl")
    train = [r for r in recs if r.split == "train"]
    wq, val = webqsp_pairs(train), webqsp_pairs([r for r in recs if r.split == "validation"])
    qtypes = metaqa_qtypes(a.shared / "metaqa")
    mq = metaqa_pairs([a.split / f for f in ("train.txt", "train_extra.txt", "train_types.txt",
                                             "val.txt")], qtypes)
    vocab = sorted({g for p in [*wq, *mq, *val] for g in p.gold})  # as path_accuracy's
    eq = interchangeable(train, a.min)
    m = load_matcher(a.planner, "minilm", None)  # scored as the planner scores a path
    top = [vocab[int(m.similarity(m.encode_question(p.text), vocab).argmax())] for p in val]

    def same(t: tuple, g: tuple) -> bool:
        return len(t) == len(g) and all(x == y or y in eq.get(x, ()) for x, y in zip(t, g))

    strict = [t in set(p.gold) for t, p in zip(top, val)]
    loose = [any(same(t, g) for g in p.gold) for t, p in zip(top, val)]
    out = {"planner": a.planner, "questions": len(val),
           "interchangeable_pairs": sum(len(s) for s in eq.values()) // 2,
           "path_acc": round(float(np.mean(strict)), 4),
           "path_acc_interchangeable_counted": round(float(np.mean(loose)), 4),
           "examples": [{"question": p.text, "top": path_words(t),
                         "gold": [path_words(g) for g in p.gold][:3]}
                        for t, p, s, lo in zip(top, val, strict, loose) if lo and not s][:15]}
    a.output.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if k != "examples"}))


if __name__ == "__main__":
    main()
