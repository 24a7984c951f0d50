"""Choose the Freebase planner's labels on the training records' validation part: fit the
planner on split "train" with each label source and minimum path count, report path
accuracy on split "validation" (no store is read; nothing of the 400 dev questions).

    python bench/webqsp_planner_labels.py ../shared/data/webqsp-train/train.jsonl \
        --min-counts 1,2,3 --epochs 100,300 [--out bench/results/webqsp_planner_labels.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from talent_core.embedding import get_embedder
from talent_core.training.planner import (
    LABEL_SOURCES,
    fit_from_labels,
    label_texts,
    read_path_labels,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("labels", type=Path)
    ap.add_argument("--min-counts", default="1,2,3")
    ap.add_argument("--epochs", default="300")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    recs = read_path_labels(a.labels)
    t = time.perf_counter()
    vecs = np.asarray(get_embedder("minilm", backend="numpy").encode(label_texts(recs)),
                      dtype=np.float32)
    embed_s = time.perf_counter() - t
    runs = []
    grid = [(s, mc, ep) for s in LABEL_SOURCES for mc in a.min_counts.split(",")
            for ep in a.epochs.split(",")]
    for source, mc, ep in grid:
        m = fit_from_labels(recs, None, None, name="probe", embedding_model="minilm",  # type: ignore[arg-type]
                            source=source, min_count=int(mc), epochs=int(ep),  # type: ignore[arg-type]
                            vectors=vecs)
        row = {"source": source, "min_count": int(mc), "epochs": int(ep),
               "paths": len(m.paths), "kb": round(len(m.paths) * (384 + 1) * 4 / 1024, 1),
               "labelled": m.meta["trained_on"]["labelled"],
               "train": m.meta["training"], "validation": m.meta["validation"]}
        runs.append(row)
        print(json.dumps(row), flush=True)
    out = {"file": str(a.labels), "records": len(recs),
           "train": sum(r.split == "train" for r in recs),
           "validation": sum(r.split == "validation" for r in recs),
           "embed_s": round(embed_s, 1), "runs": runs,
           "uptime": os.popen("uptime").read().strip()}
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
