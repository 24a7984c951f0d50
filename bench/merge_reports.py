"""Merge evaluation reports of DISJOINT question sets into one report (cross-fitting).

A learned retriever evaluated on every question of a dev set is trained on the other
questions: e.g. SubgraphRAG's scorer trained on WebQSP half B scores half A and vice versa.
Each half is its own `talent eval --report` run (its own --scorer, --limit/--offset); this
script pools their rows (rows.jsonl) and recomputes every table and plot with the report's
own functions, so the merged figures are exactly those of one run over all the questions.

    python bench/merge_reports.py DIR_A DIR_B -o OUT_DIR

The two runs must share methods, modes and sweeps; their retrieval configurations may
differ only in the settings listed with --may-differ (default: scorer).

`--hop-file 1=PATH` (repeatable) gives the rows of the questions found in a MetaQA file
their hop when the report's own file names did not carry it (one file of several hops):
the per-hop tables are then derived. One DIR alone just re-derives its report this way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from talent_core.evaluation.markdown import markdown
from talent_core.evaluation.methods import METHODS, MODE_ORDER, project
from talent_core.evaluation.plots import write_plots
from talent_core.evaluation.runner import read_rows
from talent_core.evaluation.summary import results
from talent_core.evaluation.sweep import Sweep, sweep_points
from talent_core.questions import read_questions


def load(d: Path) -> tuple[dict, list[dict]]:
    rep = json.loads((d / "report.json").read_text(encoding="utf-8"))
    chash = rep["config"]["config_hash"]
    rows = [r for r in read_rows(d / "rows.jsonl") if r.get("config") == chash]
    if len(rows) != rep["run"]["rows"]:
        sys.exit(f"{d}: rows.jsonl holds {len(rows)} rows of this configuration, "
                 f"report.json says {rep['run']['rows']}")
    return rep, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--may-differ", default="scorer",
                    help="comma list of retrieval settings allowed to differ between runs")
    ap.add_argument("--hop-file", action="append", default=[], metavar="HOP=PATH",
                    help="MetaQA question file whose questions are of hop HOP")
    args = ap.parse_args()
    loaded = [load(d) for d in args.dirs]
    hop_of: dict[tuple[str, tuple[str, ...]], int] = {}
    for spec in args.hop_file:
        hop, _, path = spec.partition("=")
        for rec in read_questions(Path(path), "metaqa"):
            hop_of[(rec.question, tuple(sorted(rec.answers)))] = int(hop)
    if hop_of:
        for _, rows in loaded:
            for r in rows:
                found = hop_of.get((r["question"], tuple(sorted(r["gold"]))))
                if r.get("hop") is None and found is not None:
                    r["hop"] = found
    base = loaded[0][0]
    free = set(args.may_differ.split(","))
    for rep, _ in loaded[1:]:
        for key in ("methods", "modes", "sweeps", "format"):
            if rep["config"][key] != base["config"][key]:
                sys.exit(f"the runs differ in {key}: cannot merge")
        a, b = base["config"]["retrieval"], rep["config"]["retrieval"]
        diff = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} - free
        if diff:
            sys.exit(f"the runs' retrieval settings differ in {sorted(diff)}: cannot merge")
    ids = [r["id"] for _, rows in loaded for r in rows]
    keys = [r["key"] for _, rows in loaded for r in rows]
    if len(set(keys)) != len(keys):
        sys.exit("the runs share questions: cross-fitted halves must be disjoint")
    rows = [r for _, rows in loaded for r in rows]
    methods = base["config"]["methods"]
    merged = dict(base)
    merged["command"] = "merged (bench/merge_reports.py): " + " + ".join(
        f"`{rep['command']}`" for rep, _ in loaded)
    files = {json.dumps(f, sort_keys=True): f for rep, _ in loaded
             for f in rep["dataset"]["files"]}
    merged["dataset"] = {**base["dataset"], "files": list(files.values()),
                         "questions": sum(rep["dataset"]["questions"] for rep, _ in loaded)}
    first = {}
    for r in (r for _, rows in loaded for r in rows):
        first.setdefault(r["id"], str(r.get("hop")))
    hops: dict[str, int] = {}
    for h in first.values():
        hops[h] = hops.get(h, 0) + 1
    merged["dataset"]["questions_by_hop"] = hops
    if args.hop_file:
        merged["dataset"]["hop_files"] = args.hop_file
    merged["config"] = {**base["config"], "limit": len(set(ids)), "offset": 0, "merged_from": [
        {"dir": str(d), "retrieval": rep["config"]["retrieval"], "limit": rep["config"]["limit"],
         "offset": rep["config"]["offset"]} for d, (rep, _) in zip(args.dirs, loaded,
                                                                    strict=True)]}
    points = sweep_points([Sweep(s["name"], s["values"], s.get("dirs", {}))
                              for s in base["config"]["sweeps"]])
    merged["results"] = sorted(results(rows), key=lambda g: (
        methods.index(g["method"]), MODE_ORDER.index(g["mode"]),
        [points.index(p) for p in points
         if project(p, METHODS[g["method"]], g["mode"]) == g["point"]][0]))
    merged["run"] = {"rows": len(rows), "computed": sum(r["run"]["computed"] for r, _ in loaded),
                     "resumed": sum(r["run"]["resumed"] for r, _ in loaded),
                     "questions": len(set(ids))}
    args.out.mkdir(parents=True, exist_ok=True)
    merged["plots"] = write_plots(merged, args.out, merged.get("reference_point", {}))
    (args.out / "report.json").write_text(json.dumps(merged, indent=1, ensure_ascii=False)
                                          + "\n", encoding="utf-8")
    (args.out / "report.md").write_text(markdown(merged), encoding="utf-8")
    print(f"{len(rows)} rows over {len(set(ids))} questions -> {args.out}/report.md")


if __name__ == "__main__":
    main()
