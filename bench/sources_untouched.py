"""Candidate S (node and edge ids) of the 300 held-out MetaQA questions, written as JSON: run it
before and after a `talent load --replace` to see which questions an edit leaves untouched
(issue 33; bench/results/sources_untouched_retrieval.json):

    TALENT_DATA_DIR=DIR python bench/sources_untouched.py OUT.json [--questions FILE]
    python bench/sources_untouched.py OUT.json --classify BEFORE.json AFTER.json \
        --dropped DROPPED.txt

Each question's record also holds its expanded neighbourhood's triples (`region`: the capped
n-hop region the retriever ranks, from the anchors of its S). `--classify`: a question is
touched when a dropped triple was in its region before the replace (then its S may change);
the untouched questions' S before and after are compared.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from talent_core.evaluation.datasets import read_items
from talent_core.pipeline import Pipeline


def candidates(pipe: Pipeline, questions: Path) -> dict:
    cfg = pipe.retrieval_config()
    out = {}
    for it in read_items([questions], "metaqa"):
        c = pipe.retrieve(it.rec.question, it.rec.topic_entities or None)
        region = pipe.store.neighbourhood(c.anchors, cfg.hops, cfg.caps()) if c.anchors \
            else None
        out[it.rec.id] = {"nodes": sorted(n.id for n in c.nodes),
                          "edges": sorted(f"{e.src}|{e.rel}|{e.dst}" for e in c.edges),
                          "region": sorted({f"{e.src}|{e.rel}|{e.dst}" for e in region.edges})
                          if region else []}  # fmt: skip
    return out


def classify(before: dict, after: dict, dropped: Path) -> dict:
    gone = {ln for ln in dropped.read_text(encoding="utf-8").splitlines() if ln}
    rows: dict[str, list[str]] = {"touched": [], "untouched_same": [], "untouched_differ": []}
    for qid, b in before.items():
        if gone & (set(b["region"]) | set(b["edges"])):
            rows["touched"].append(qid)
        elif (b["nodes"], b["edges"]) == (after[qid]["nodes"], after[qid]["edges"]):
            rows["untouched_same"].append(qid)
        else:
            rows["untouched_differ"].append(qid)
    return {k: {"questions": len(v), "ids": v[:20]} for k, v in rows.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--questions", type=Path, default=Path(".talent/exp2/test.txt"))
    ap.add_argument("--classify", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--dropped", type=Path)
    a = ap.parse_args()
    if a.classify:
        before, after = (json.loads(p.read_text(encoding="utf-8")) for p in a.classify)
        out = classify(before, after, a.dropped)
    else:
        out = candidates(Pipeline(), a.questions)
    a.out.write_text(json.dumps(out, indent=1 if a.classify else None), encoding="utf-8")


if __name__ == "__main__":
    main()
