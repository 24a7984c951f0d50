"""The one ExplaGraphs split (issue 31): train / validation / held-out example ids of
../shared/data/explagraphs/train_dev_sample.tsv, written to bench/explagraphs_split.json.

Held-out = the 100 rows of bench/results/explagraphs_frozen.json plus a seeded draw of more
rows from data row index >= 60 (the first 60 went into the issue 8 report); validation = a
seeded draw from what is left; the rest is training. Ids are `example_id` (an identical
argument pair is one id), so no id is in two parts. Nothing held out is trained or tuned on.

With ``--examples DIR`` it also writes the training records (TrainingExample JSONL, the
whole graph as S, pseudo-gold nodes by `explagraphs.path_gold`) for train and validation.

    python bench/explagraphs_split.py [--extra 300] [--val 160] [--examples runs/explagraphs]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections import Counter
from pathlib import Path

from talent_core.llm.data import write_examples
from talent_core.llm.explagraphs import path_gold, read_explagraphs, to_example

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "explagraphs" / "train_dev_sample.tsv"
FROZEN = ROOT / "bench" / "results" / "explagraphs_frozen.json"
OUT = ROOT / "bench" / "explagraphs_split.json"
SEED = 3131
SKIP = 60


def make_split(records, frozen_ids: list[str], extra: int, n_val: int) -> dict[str, list[str]]:
    """{"train", "validation", "held_out"}: disjoint lists of ids in file order."""
    ids = list(dict.fromkeys(r.id for r in records))
    index = {}
    for i, r in enumerate(records):
        index.setdefault(r.id, i)
    missing = set(frozen_ids) - set(ids)
    if missing:
        raise SystemExit(f"{FROZEN}: {len(missing)} held-out ids are not rows of {DATA}")
    rng = random.Random(SEED)
    pool = [i for i in ids if index[i] >= SKIP and i not in set(frozen_ids)]
    held = set(frozen_ids) | set(rng.sample(pool, extra))
    rest = [i for i in ids if i not in held]
    val = set(rng.sample(rest, n_val))
    return {"train": [i for i in ids if i not in held and i not in val],
            "validation": [i for i in ids if i in val],
            "held_out": [i for i in ids if i in held]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extra", type=int, default=300, help="held-out rows beyond the 100")
    ap.add_argument("--val", type=int, default=160)
    ap.add_argument("--examples", type=Path, help="write train/validation JSONL here")
    args = ap.parse_args()
    records = read_explagraphs(DATA)
    frozen_ids = json.loads(FROZEN.read_text())["rows"]["ids"]
    split = make_split(records, frozen_ids, args.extra, args.val)
    by_id = {r.id: r for r in records}
    labels = {k: dict(Counter(by_id[i].label for i in v)) for k, v in split.items()}
    out = {
        "what": "ExplaGraphs train / validation / held-out ids (example_id) of the data file; "
                "held_out = the 100 rows of bench/results/explagraphs_frozen.json plus "
                f"random.Random({SEED}).sample(other ids of row index >= {SKIP}, {args.extra}); "
                f"validation = the same generator's sample of the rest, {args.val}; "
                "train = the rest",
        "command": "python bench/explagraphs_split.py",
        "data": str(DATA.relative_to(ROOT.parent)),
        "seed": SEED,
        "sizes": {k: len(v) for k, v in split.items()},
        "labels": labels,
        **split,
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    summary: dict = {"sizes": out["sizes"], "labels": labels}
    if args.examples is not None:
        for part in ("train", "validation"):
            recs = [by_id[i] for i in split[part]]
            golds = [path_gold(r) for r in recs]
            write_examples(args.examples / f"{part}.jsonl",
                           (to_example(r, g.nodes) for r, g in zip(recs, golds, strict=True)))
            sizes = [len(g.nodes) for g in golds]
            graph = [len({c.lower() for a, _, b in r.triples for c in (a, b)}) for r in recs]
            summary[part] = {
                "examples": len(recs), "rules": dict(Counter(g.rule for g in golds)),
                "mean_gold_nodes": round(statistics.fmean(sizes), 3),
                "mean_graph_nodes": round(statistics.fmean(graph), 3),
            }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
