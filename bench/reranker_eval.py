"""The path re-ranker measured on the planner alone (no language model): the beam's best R
paths by the bi-encoder, each also scored by the cross-encoder, and the top path's hit
under each way of combining them.

    TALENT_DATA_DIR=.talent/b/metaqa python bench/reranker_eval.py .talent/s57/xval.txt \
        --planner .talent/s57/t3 --reranker .talent/rr/wq_self_mq \
        --metaqa ../shared/data/metaqa -o J

Per question (one anchor group, as `planning.plan.matcher_plan` plans it): the bi-encoder's
best ``--keep`` paths, their scores (``scale`` x cosine), the re-ranker's logits, whether
each path's ends hold a gold answer and (MetaQA) whether it is the question type's path.
Summary: top-path hit and path accuracy for the bi-encoder alone and for re-ranking its
best R (R in ``--r``) by logit + lambda x bi score (lambda in ``--lam``), by hop.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from talent_core.pipeline import Pipeline
from talent_core.planning.beam import complete, grow
from talent_core.planning.paths import plan_text
from talent_core.planning.plan import _scorers
from talent_core.planning.reranker import load_reranker
from talent_core.questions import read_questions
from talent_core.text import answer_key
from talent_core.training.matcher import metaqa_type_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matcher_plan_eval import line_qtypes  # noqa: E402


def pick(row: dict, r: int, lam: float | None) -> dict | None:
    c = row["cands"][:r]
    if not c:
        return None
    if lam is None:
        return c[0]
    return max(c, key=lambda x: x["ce"] + lam * x["bi"])


def vocab_eval(a: argparse.Namespace) -> dict:
    """WebQSP's validation labels, path accuracy as `bench/matcher_length_prior.py` (the
    likeliest of every gold path of the training and validation pairs is a gold path), the
    bi-encoder's best R of them re-ranked."""
    from talent_core.planning.matcher import load_matcher, path_words
    from talent_core.training.matcher import read_pairs

    train, val = read_pairs([a.questions], None, [])
    vocab = sorted({g for p in [*train, *val] for g in p.gold})
    matcher = load_matcher(a.planner, "minilm", None)
    rr = load_reranker(a.reranker, "minilm")
    q = np.stack([matcher.encode_question(p.text) for p in val])
    bi = matcher.scale * (q @ matcher.path_vectors([path_words(t) for t in vocab]).T)
    keep = np.argsort(-bi, axis=1)[:, : a.keep]
    rows = []
    for i, p in enumerate(val):
        paths = [vocab[j] for j in keep[i]]
        ce = rr.score(p.text, paths).tolist()
        rows.append({"text": p.text, "cands": [
            {"path": " > ".join(t), "bi": round(float(bi[i, j]), 3), "ce": round(c, 3),
             "hit": t in set(p.gold)} for t, j, c in zip(paths, keep[i], ce)]})
    return {"all": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--vocab", action="store_true",
                    help="questions: a label file (.jsonl); its validation split, path accuracy")
    ap.add_argument("--format", default=None)
    ap.add_argument("--planner", required=True)
    ap.add_argument("--reranker", type=Path, required=True)
    ap.add_argument("--metaqa", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--keep", type=int, default=8)
    ap.add_argument("--r", default="3,5,8")
    ap.add_argument("--lam", default="0,0.1,0.25,0.5,1")
    ap.add_argument("-o", "--out", type=Path, default=None)
    a = ap.parse_args()
    qtypes = line_qtypes(a.questions, a.metaqa) if a.metaqa else {}
    rows = vocab_eval(a)["all"] if a.vocab else []
    p = Pipeline(planner=a.planner) if not a.vocab else None
    planner = p.planner if p else None
    rr = None if a.vocab else load_reranker(a.reranker, p.settings.embedding_model)
    for i, rec in enumerate(read_questions(a.questions, a.format, a.limit) if p else []):
        cand, _ = p.retrieve_planned(rec.question, rec.topic_entities, plan_join=0)
        names = {s.id: s.name for s in cand.seeds}
        text = plan_text(cand.question, [names.get(x, "") for x in cand.anchors])
        score, quick = _scorers(planner.matcher, planner.matcher.encode_question(text))
        grown = grow(p.store, cand.anchors, score, planner.beam, quick)
        order = sorted(grown.scores, key=lambda t: (-grown.scores[t], len(t), t))[: a.keep]
        complete(p.store, cand.anchors, grown, order, planner.beam.walk_limit)
        t0 = time.perf_counter()
        ce = rr.score(text, order).tolist() if order else []
        ms = (time.perf_counter() - t0) * 1000
        gold = {answer_key(x) for x in [*rec.answers, *rec.answer_entities]}
        ids = sorted({n for t in order for n in grown.ends.get(t, set())})
        nm = {e.id: answer_key(e.name) for e in p.store.entities_by_id(ids)} if ids else {}
        qtype = qtypes.get(i)
        gold_path = metaqa_type_path(qtype) if qtype else None
        row = {"id": rec.id, "text": text, "rerank_ms": round(ms, 1), "cands": [
            {"path": " > ".join(t), "bi": round(grown.scores[t], 3), "ce": round(c, 3),
             "hit": bool({nm.get(n, "") for n in grown.ends.get(t, set())} & gold),
             **({"exact": t == gold_path} if gold_path else {})}
            for t, c in zip(order, ce) if grown.ends.get(t)]}
        if gold_path:
            row["hop"] = len(gold_path)
        rows.append(row)
        if (i + 1) % 50 == 0:
            print(i + 1, flush=True)
    rs = [int(x) for x in a.r.split(",")]
    lams = [float(x) for x in a.lam.split(",")]
    groups = defaultdict(list)
    for r in rows:
        groups["all"].append(r)
        if "hop" in r:
            groups[f"{r['hop']}-hop"].append(r)
    summary: dict = {}
    for g, grp in groups.items():
        s = {"questions": len(grp)}
        for name, r, lam in [("bi", 1, None), *[(f"R{r}_lam{lam}", r, lam) for r in rs
                                                for lam in lams]]:
            got = [pick(x, r, lam) for x in grp]
            s[name] = round(float(np.mean([bool(c and c["hit"]) for c in got])), 4)
            if a.metaqa:
                s[name + "_exact"] = round(float(np.mean([bool(c and c.get("exact"))
                                                          for c in got])), 4)
        s["oracle8"] = round(float(np.mean([any(c["hit"] for c in x["cands"]) for x in grp])), 4)
        summary[g] = s
    ms = sorted(r.get("rerank_ms", 0) for r in rows)
    summary["rerank_ms"] = {"p50": ms[len(ms) // 2], "p95": ms[int(0.95 * (len(ms) - 1))]}
    summary["uptime"] = os.popen("uptime").read().strip()
    print(json.dumps(summary, indent=1))
    if a.out:
        a.out.write_text(json.dumps({"planner": a.planner, "reranker": str(a.reranker),
                                     "summary": summary, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
