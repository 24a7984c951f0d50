"""The stance task with the shipped ExplaGraphs (label-task) adapters, beside the frozen base
model, on the held-out rows of bench/explagraphs_split.json (issue 31): accuracy, majority
baseline, per-class and balanced accuracy, latency per question, for each configuration:

* ``trained``: the package's default models (`talent ask --stance` with no flag: the
  shipped ExplaGraphs adapters), modes full (retriever selects) and no-retriever;
* ``frozen``: the base model without adapters (``--adapters none``).

``--retriever DIR --generator DIR`` evaluates other label-task adapters (e.g. on the
validation part, to choose a checkpoint) instead of the shipped ones.

    OMP_NUM_THREADS=1 python bench/explagraphs_eval.py [--part held_out] \
        [--configs trained:full,trained:no-retriever,frozen:no-retriever] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from benchio import load_average

from talent_core.evaluation.stance import evaluate_stance
from talent_core.llm.explagraphs import path_gold, read_explagraphs
from talent_core.pipeline import Pipeline
from talent_core.stance import label_models
from talent_core.store.memory import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "explagraphs" / "train_dev_sample.tsv"
SPLIT = ROOT / "bench" / "explagraphs_split.json"
OUT = ROOT / "bench" / "results" / "explagraphs_trained.json"


def evidence_stats(per_row: list[dict], records: dict) -> dict:
    """The retriever's evidence against the rule's pseudo-gold (`explagraphs.path_gold`):
    mean recall, precision and size, and the graph's mean size."""
    rec, prec, size, graph = [], [], [], []
    for r in per_row:
        gold = set(path_gold(records[r["id"]]).nodes)
        got = {n.lower() for n in r["evidence"]}
        rec.append(len(gold & got) / len(gold) if gold else 1.0)
        prec.append(len(gold & got) / len(got) if got else 0.0)
        size.append(len(got))
        graph.append(len({c.lower() for a, _, b in records[r["id"]].triples for c in (a, b)}))
    n = max(1, len(per_row))
    return {"recall": round(sum(rec) / n, 4), "precision": round(sum(prec) / n, 4),
            "size": round(sum(size) / n, 3), "graph_nodes": round(sum(graph) / n, 3)}


def rss_mb() -> float:
    """This process's resident memory now (MB, from /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="held_out", choices=["held_out", "validation"])
    ap.add_argument("--configs", default="trained:full,trained:no-retriever,frozen:no-retriever")
    ap.add_argument("--retriever", type=Path, help="label-task retriever adapter (not shipped)")
    ap.add_argument("--generator", type=Path, help="label-task generator adapter (not shipped)")
    ap.add_argument("--generator-type", default="text", choices=["text", "graph-prompt"],
                    help="the shipped generator to use (graph-prompt: explagraphs/generator-graph)")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--stats-only", action="store_true",
                    help="only (re)compute the evidence figures of an existing --out file")
    args = ap.parse_args()
    split = json.loads(SPLIT.read_text())
    wanted = set(split[args.part])
    rows = [r for r in read_explagraphs(DATA) if r.id in wanted][: args.limit]
    by_id = {r.id: r for r in rows}
    if args.stats_only:
        done = json.loads(args.out.read_text())
        for spec, run in done["runs"].items():
            if spec.endswith(":full"):
                run["evidence_vs_path_gold"] = evidence_stats(run["per_row"], by_id)
                print(json.dumps({spec: run["evidence_vs_path_gold"]}))
        args.out.write_text(json.dumps(done, indent=1) + "\n")
        return
    out: dict = {
        "what": "stance task (talent_core.stance) on ExplaGraphs rows kept apart, each row's "
                "explanation graph given as S, ranked over the two labels; trained = the "
                "package defaults (shipped ExplaGraphs label-task adapters), frozen = "
                "--adapters none",
        "command": f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} "
                   "python bench/explagraphs_eval.py "
                   f"--part {args.part} --configs {args.configs}"
                   + (f" --retriever {args.retriever}" if args.retriever else "")
                   + (f" --generator {args.generator}" if args.generator else "")
                   + (f" --generator-type {args.generator_type}"
                      if args.generator_type != "text" else "")
                   + (f" --limit {args.limit}" if args.limit else ""),
        "data": str(DATA.relative_to(ROOT.parent)),
        "split": f"bench/explagraphs_split.json [{args.part}]",
        "n_rows": len(rows),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "uptime_before": load_average()["uptime"],
        "runs": {},
    }
    pipes: dict[str, Pipeline] = {}
    try:
        for spec in args.configs.split(","):
            config, mode = spec.split(":")
            if config not in pipes:
                options: dict = ({"adapters": "none"} if config == "frozen" else
                                 {"retriever_dir": args.retriever,
                                  "generator_dir": args.generator,
                                  "generator_type": args.generator_type})
                pipes[config] = Pipeline(store=MemoryStore(), **options)
                pipes[config].models  # noqa: B018  (the KGQA pair loaded, as `talent ask`)
                before = rss_mb()
                label_models(pipes[config])  # attaches the shipped label pair, if any
                out.setdefault("rss_mb", {})[config] = {
                    "models_loaded": before, "with_label_adapters": rss_mb()}
            t = time.time()
            summary, per_row = evaluate_stance(pipes[config], rows, mode)  # type: ignore[arg-type]
            summary["wall_s"] = round(time.time() - t, 1)
            summary["uptime_after"] = load_average()["uptime"]
            summary["per_row"] = [{k: r[k] for k in ("id", "gold", "label", "scores",
                                                     "evidence", "latency_ms")}
                                  for r in per_row]
            if mode == "full":
                summary["evidence_vs_path_gold"] = evidence_stats(summary["per_row"], by_id)
            out["runs"][spec] = summary
            print(json.dumps({spec: {k: summary[k] for k in (
                "n", "accuracy", "balanced_accuracy", "per_class", "majority_baseline",
                "latency_ms", "frozen", "adapters")}}), flush=True)
            args.out.write_text(json.dumps(out, indent=1) + "\n")  # each run as it ends
    finally:
        for p in pipes.values():
            p.close()
    out["uptime_after"] = load_average()["uptime"]
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
