"""Train the question <-> relation-path matchers of issue 45's measurements (the shipped one
is `talent train planner`'s; these hold one dataset out):

    python bench/matcher_train.py --data wq -o .talent/matchers/wq   # WebQSP train only
    python bench/matcher_train.py --data mq -o .talent/matchers/mq   # MetaQA train only
    python bench/matcher_train.py --data both -o DIR                 # both

WebQSP: `webqsp-train/train.jsonl` split "train" (validation: its split "validation").
MetaQA: the train, train_extra and train_types parts of `bench/metaqa_split.py` (README of
bench/: `.talent/exp2`), typed by qa_dev_qtype.txt (validation: val.txt). Never the held-out
test parts. Writes the matcher and prints its meta (validation path accuracy on both
datasets' validation parts).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from talent_core.training.matcher import (
    FitSettings,
    fit_matcher,
    metaqa_pairs,
    metaqa_qtypes,
    webqsp_pairs,
)
from talent_core.training.path_labels import read_path_labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=("wq", "mq", "both"), required=True)
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--split", type=Path, default=Path(".talent/exp2"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rank", type=int, default=16, help="LoRA rank")
    ap.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha")
    ap.add_argument("--seed", type=int, default=0, help="the fit's seed (batches, negatives)")
    ap.add_argument("--mine", type=int, default=0,
                    help="hard negatives mined by the model itself: the top K wrong paths")
    ap.add_argument("--mine-from", type=int, default=1, help="the first epoch (0-based) mined")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    recs = read_path_labels(a.shared / "webqsp-train" / "train.jsonl")
    wq = webqsp_pairs([r for r in recs if r.split == "train"])
    wq_val = webqsp_pairs([r for r in recs if r.split == "validation"])
    qtypes = metaqa_qtypes(a.shared / "metaqa")
    mq = metaqa_pairs([a.split / f for f in ("train.txt", "train_extra.txt", "train_types.txt")],
                      qtypes)
    mq_val = metaqa_pairs([a.split / "val.txt"], qtypes)
    pairs = {"wq": wq, "mq": mq, "both": wq + mq}[a.data]
    val = {"wq": wq_val, "mq": mq_val, "both": wq_val + mq_val}[a.data]
    t0 = time.time()
    meta = fit_matcher(pairs, a.output, name=f"{a.data}", base_model="minilm",
                       settings=FitSettings(epochs=a.epochs, threads=a.threads, rank=a.rank,
                                            alpha=a.alpha, seed=a.seed, mine=a.mine,
                                            mine_from=a.mine_from), val=val,
                       trained_on={"data": a.data},
                       progress=lambda s, n, loss: logging.info("step %d/%d loss %.3f", s, n,
                                                                loss) if s % 20 == 0 else None)
    print(json.dumps({"meta": meta, "wall_s": round(time.time() - t0, 1)}, indent=1))


if __name__ == "__main__":
    main()
