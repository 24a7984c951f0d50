"""Candidate S (node and edge ids) of the 300 held-out MetaQA questions, written as JSON: run it
before and after a `talent load --replace` to see which questions an edit leaves untouched
(issue 33; bench/results/sources_untouched_retrieval.json):

    TALENT_DATA_DIR=DIR python bench/sources_untouched.py OUT.json [--questions FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from talent_core.evaluation.datasets import read_items
from talent_core.pipeline import Pipeline


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--questions", type=Path, default=Path(".talent/exp2/test.txt"))
    a = ap.parse_args()
    pipe = Pipeline()
    out = {}
    for it in read_items([a.questions], "metaqa"):
        c = pipe.retrieve(it.rec.question, it.rec.topic_entities or None)
        out[it.rec.id] = {"nodes": sorted(n.id for n in c.nodes),
                          "edges": sorted(f"{e.src}|{e.rel}|{e.dst}" for e in c.edges)}
    a.out.write_text(json.dumps(out), encoding="utf-8")


if __name__ == "__main__":
    main()
