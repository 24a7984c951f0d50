"""Train a path re-ranker (`planning.reranker`) for issue 45's measurements, holding a dataset
out as `bench/matcher_train.py` does:

    python bench/reranker_train.py --wq --self-store .talent/b/metaqa \
        --miner .talent/s57/t3 -o .talent/rr/wq_self_mq     # MetaQA never seen
    python bench/reranker_train.py --wq --mq --miner bundled -o DIR   # both datasets

Pairs: WebQSP `webqsp-train` split "train", the MetaQA train parts of
`bench/metaqa_split.py` (`.talent/exp2`), and/or questions written from a store
(`planning.self_train.store_pairs`, `--self`'s anchors and seed; the same nine tenths
`fit_self` trains on). Hard negatives mined with the bi-encoder ``--miner``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from talent_core.planning.matcher import load_matcher
from talent_core.training.matcher import metaqa_pairs, metaqa_qtypes, webqsp_pairs
from talent_core.training.path_labels import read_path_labels
from talent_core.training.reranker import RerankSettings, fit_reranker, mine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wq", action="store_true")
    ap.add_argument("--mq", action="store_true")
    ap.add_argument("--self-store", type=Path, default=None)
    ap.add_argument("--miner", required=True, help="bi-encoder matcher dir or 'bundled'")
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--split", type=Path, default=Path(".talent/exp2"))
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--init", type=Path, default=None, help="a re-ranker to start from")
    ap.add_argument("--lr", type=float, default=3e-4)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    pairs = []
    if a.wq:
        recs = read_path_labels(a.shared / "webqsp-train" / "train.jsonl")
        pairs += webqsp_pairs([r for r in recs if r.split == "train"])
    if a.mq:
        qtypes = metaqa_qtypes(a.shared / "metaqa")
        pairs += metaqa_pairs([a.split / f for f in ("train.txt", "train_extra.txt",
                                                     "train_types.txt")], qtypes)
    if a.self_store:
        import os

        from talent_core.config import Settings
        from talent_core.planning.self_train import SELF, store_pairs
        from talent_core.store import open_store

        os.environ["TALENT_DATA_DIR"] = str(a.self_store)
        store = open_store(Settings())
        try:
            own = store_pairs(store, SELF.anchors, 0)
        finally:
            store.close()
        pairs += own[: len(own) - max(1, len(own) // 10)]
    if a.limit:
        pairs = pairs[: a.limit]
    t0 = time.time()
    miner = load_matcher(a.miner, "minilm", None)
    hard = mine(pairs, miner)
    logging.info("mined %d pairs' negatives in %.0f s", len(pairs), time.time() - t0)
    meta = fit_reranker(pairs, hard, a.output, name=a.output.name, base_model="minilm",
                        settings=RerankSettings(epochs=a.epochs, lr=a.lr), init=a.init,
                        trained_on={"wq": a.wq, "mq": a.mq, "self_store": str(a.self_store),
                                    "miner": a.miner, "init": str(a.init)},
                        progress=lambda s, n, loss: logging.info(
                            "step %d/%d loss %.3f", s, n, loss) if s % 20 == 0 else None)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
