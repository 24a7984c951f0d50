"""A length prior for the path matcher, measured on WebQSP's validation labels only (issue
45: would a penalty per relation beyond the first tell a matcher trained on WebQSP where a
question on another KG stops?). Validation path accuracy as the trainer's (the likeliest of
every gold path of the training and validation pairs is a gold path), scores 20 x cosine
minus ``penalty`` x (relations - 1):

    TALENT_DATA_DIR=.talent/b/webqsp TALENT_PLANNER=DIR python bench/matcher_length_prior.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from talent_core.pipeline import Pipeline
from talent_core.planning.matcher import path_words
from talent_core.training.matcher import read_pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=Path,
                    default=Path("../shared/data/webqsp-train/train.jsonl"))
    ap.add_argument("--penalties", default="0,0.25,0.5,1,1.5,2,3")
    args = ap.parse_args()
    train, val = read_pairs([args.labels], None, [])
    vocab = sorted({g for p in [*train, *val] for g in p.gold})
    matcher = Pipeline().planner.matcher
    q = np.stack([matcher.encode_question(p.text) for p in val])
    scores = matcher.scale * (q @ matcher.path_vectors([path_words(t) for t in vocab]).T)
    lengths = np.array([len(t) for t in vocab])
    out = {"matcher": matcher.name, "questions": len(val), "paths": len(vocab), "by_penalty": {}}
    for penalty in (float(x) for x in args.penalties.split(",")):
        top = (scores - penalty * (lengths - 1)).argmax(axis=1)
        acc = float(np.mean([vocab[t] in set(p.gold) for t, p in zip(top, val)]))
        out["by_penalty"][str(penalty)] = {"path_acc": round(acc, 4),
                                           "mean_top_length": round(float(lengths[top].mean()), 2)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
