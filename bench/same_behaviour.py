"""Dump what the full pipeline does per question (candidate node ids, selected node ids,
answers) so that two versions of the code can be compared id by id (issue 27's "same
behaviour" check: matching metrics could hide different nodes).

    TALENT_DATA_DIR=.talent/metaqa python bench/same_behaviour.py QUESTIONS --format metaqa \
        --pick 1-30,101-130,201-230 -o before_metaqa.json
    python bench/same_behaviour.py --compare before.json after.json

``--pick``: 1-based line ranges of the question file (after comments/blank lines). Code
with issue 28's changes runs with them off, as the code before them behaved: fuzzy linking
off here, and `TALENT_ANSWER_SET=margin` in the environment.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def picked(spec: str | None, n: int) -> list[int]:
    if not spec:
        return list(range(n))
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo) - 1, int(hi or lo)))
    return [i for i in out if i < n]


def dump(args: argparse.Namespace) -> None:
    from talent_core.pipeline import Pipeline
    from talent_core.questions import read_questions
    from talent_core.retrieval.config import RetrievalConfig

    recs = list(read_questions(Path(args.questions), args.format))
    recs = [recs[i] for i in picked(args.pick, len(recs))]
    config = {"hops": args.hops}
    if "fuzzy_link" in RetrievalConfig.model_fields:  # linking (issue 28) off: as before it
        config["fuzzy_link"] = False
    pipe = Pipeline(retrieval=RetrievalConfig(**config), question_format=args.format)
    rows = []
    t0 = time.perf_counter()
    try:
        for rec in recs:
            ans = pipe.ask(rec.question, rec.topic_entities or None, mode="full")
            sel = ans.selection
            rows.append({
                "id": rec.id, "question": rec.question,
                "candidate": [n.id for n in ans.candidate.nodes],
                "candidate_edges": [[e.src, e.rel, e.dst] for e in ans.candidate.edges],
                "selected": [n.id for n in sel.selected] if sel else [],
                "out_of_candidate": [[o.name, o.id] for o in sel.out_of_candidate] if sel else [],
                "answer": ans.answer,
                "ranked": [[r.name, r.score] for r in ans.ranked[:10]],
            })
    finally:
        pipe.close()
    Path(args.out).write_text(json.dumps({"questions": args.questions, "pick": args.pick,
                                          "seconds": round(time.perf_counter() - t0, 1),
                                          "rows": rows}, indent=1))
    print(f"{len(rows)} questions -> {args.out}")


def compare(a: str, b: str) -> int:
    ra = {r["id"]: r for r in json.loads(Path(a).read_text())["rows"]}
    rb = {r["id"]: r for r in json.loads(Path(b).read_text())["rows"]}
    keys = ("candidate", "candidate_edges", "selected", "out_of_candidate", "answer", "ranked")

    def same(k: str, x: object, y: object) -> bool:
        if k != "ranked":
            return x == y
        # the same names in the same order; scores equal up to float noise (the LM's threads,
        # chosen per call from the free cores, change the order of its sums)
        return ([n for n, _ in x] == [n for n, _ in y]  # type: ignore[union-attr]
                and all(abs(a - b) <= 1e-3 for (_, a), (_, b) in zip(x, y)))  # type: ignore

    diff = [(q, k) for q in ra for k in keys
            if q not in rb or not same(k, ra[q].get(k), rb[q].get(k))]
    for q, k in diff[:20]:
        print(f"DIFF {q} {k}")
    print(f"{len(ra)} vs {len(rb)} questions; {len(diff)} differing fields")
    return 1 if diff or set(ra) != set(rb) else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", nargs="?")
    ap.add_argument("--format", default="metaqa")
    ap.add_argument("--pick")
    ap.add_argument("--hops", type=int, default=3)
    ap.add_argument("-o", "--out")
    ap.add_argument("--compare", nargs=2)
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    dump(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
