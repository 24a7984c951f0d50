"""When does the planner say the KG lacks the relation a question reads as
(`planning.plan.missing_relation`)? Per question: the retrieval's anchors, one plan, the
top path's cosine, the best of the store's `MISSING_K` nearest relations scored by the
matcher, whether the anchors have it, and whether the top path's ends hold a gold answer;
the summary counts the notices per threshold, on questions the top path answers right and
wrong.

    TALENT_DATA_DIR=.talent/b/metaqa python bench/missing_relation.py .talent/exp2/test.txt \\
        -o bench/results/missing_relation_metaqa.json
    TALENT_DATA_DIR=.talent/b/webqsp python bench/missing_relation.py \\
        .talent/b/webqsp/questions/webqsp-evidence-dev.jsonl --format rog \\
        -o bench/results/missing_relation_webqsp.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import load_average, write_json_atomic  # noqa: E402

from talent_core.models import path_text  # noqa: E402
from talent_core.pipeline import Pipeline  # noqa: E402
from talent_core.planning.paths import plan_text  # noqa: E402
from talent_core.planning.plan import MISSING_GAP, MISSING_K  # noqa: E402
from talent_core.questions import read_questions  # noqa: E402
from talent_core.text import answer_key  # noqa: E402

GAPS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--format", default=None)
    ap.add_argument("-o", "--out", type=Path, required=True)
    a = ap.parse_args()
    p = Pipeline()
    m = p.planner.matcher
    rows = []
    for rec in read_questions(a.questions, a.format, None):
        cand, _ = p.retrieve_planned(rec.question, rec.topic_entities, plan_join=0)
        plan = p.plan(cand) if cand.anchors else None
        if plan is None or not plan.paths:
            continue
        names = {s.id: s.name for s in cand.seeds}
        q = m.encode_question(plan_text(cand.question, [names.get(x, "") for x in cand.anchors]))
        rels = [r.name for r in p.store.top_relations(q.tolist(), MISSING_K)]
        sims = m.similarity(q, [(r,) for r in rels])
        top = plan.paths[0]
        top_cos = float(m.similarity(q, [tuple(top.rels)])[0])
        best = int(np.argmax(sims))
        gold = {answer_key(x) for x in [*rec.answers, *rec.answer_entities]}
        ends = plan.ends.get(path_text(top.rels), set())
        found = {e.id: e.name for e in p.store.entities_by_id(sorted(ends))}
        rows.append({"id": rec.id, "question": rec.question, "top": top.rels,
                     "top_cos": round(top_cos, 4), "best_rel": rels[best],
                     "best_cos": round(float(sims[best]), 4),
                     "at_anchor": rels[best] in p.store.relations_at(cand.anchors),
                     "gap": round(float(sims[best]) - top_cos, 4),
                     "missing": top.missing,
                     "hit": bool({answer_key(found.get(e, e)) for e in ends} & gold)})
    summary = {}
    for g in GAPS:
        fire = [r for r in rows if r["gap"] > g]
        summary[str(g)] = {"notices": len(fire), "on_right": sum(r["hit"] for r in fire),
                           "on_wrong": sum(not r["hit"] for r in fire)}
    out = {"command": " ".join(sys.argv), "load": load_average(), "threshold": MISSING_GAP,
           "questions": len(rows), "top_path_right": sum(r["hit"] for r in rows),
           "summary": summary, "rows": rows}
    write_json_atomic(a.out, out)
    print(len(rows), out["top_path_right"], summary)


if __name__ == "__main__":
    main()
