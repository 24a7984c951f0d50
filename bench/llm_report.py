"""Summarise the MetaQA LLM experiment (bench/llm_metaqa.sh) into one JSON + a markdown table.

Reads the adapters' metadata (training metrics), `/usr/bin/time -v` logs (peak RSS of the
whole process) and the per-question rows of `talent eval --rows` for each ablation; splits
the test questions by hop (looked up in the MetaQA dev files).

    python bench/llm_report.py --exp .talent/exp --runs runs \
        --metaqa ../shared/data/metaqa --out bench/results/llm_metaqa.json \
        [--baseline EXP_WITHOUT_PLANNER]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from talent_core.evaluation.summary import summarise

ABLATIONS = (("full (trained retriever + generator)", "full"),  # label, rows file stem
             ("no retriever (S straight to the generator)", "noretriever"),
             ("frozen retriever (base model selects)", "frozen"))
MODES = {  # label -> rows file under --exp (talent eval --rows)
    f"{decode} / {label}": f"eval_{decode}_{name}.jsonl"
    for decode in ("ranked", "free") for label, name in ABLATIONS
}
# --baseline EXP: the same ranked ablations measured without the relation-path planner
BASELINE = {f"ranked, no planner / {label}": f"eval_ranked_{name}.jsonl"
            for label, name in ABLATIONS}
TRAIN_KEYS = ("examples", "epochs", "steps", "seconds_this_run", "seconds_per_step",
              "seconds_per_example", "first_loss", "final_loss", "val_loss", "mean_tokens",
              "max_tokens", "mean_positive", "mean_weak", "examples_without_positive",
              "skipped_too_long", "peak_rss_mb")


def hop_index(metaqa: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in (1, 2, 3):
        for line in (metaqa / f"{h}-hop" / "qa_dev.txt").read_text().splitlines():
            if line.strip():
                q = line.split("\t")[0].replace("[", "").replace("]", "")
                out.setdefault(" ".join(q.split()), h)  # as read_questions gives it
    return out


def max_rss_mb(log: Path) -> float | None:
    if not log.exists():
        return None
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", log.read_text(errors="replace"))
    return round(int(m.group(1)) / 1024, 1) if m else None


def training(run: Path, log: Path) -> dict[str, Any]:
    meta = json.loads((run / "talent_meta.json").read_text())
    m = meta.get("metrics", {})
    out = {k: m.get(k) for k in TRAIN_KEYS if k in m}
    out["process_max_rss_mb"] = max_rss_mb(log)
    out["lam"], out["lr"] = meta.get("lam"), meta.get("train", {}).get("lr")
    out["eos_weight"] = meta.get("eos_weight")
    return out


def read_rows(path: Path) -> list[dict]:
    """The per-question rows of `talent eval --rows`."""
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def summary(rows: list[dict]) -> dict[str, Any]:
    """`talent eval`'s own summary of the rows (stage latencies included), plus the histogram of
    V-hat sizes (names the retriever output, in S or not)."""
    out = summarise(rows)
    sizes = [int(r["selected"]["size"]) for r in rows if "selected" in r]
    if sizes:
        hist: dict[str, int] = {}
        for n in sizes:
            key = str(n) if n < 10 else ("10-19" if n < 20 else "20+")
            hist[key] = hist.get(key, 0) + 1
        out["selected_size_histogram"] = dict(sorted(hist.items(), key=lambda kv: (
            len(kv[0]), kv[0])))
    if rows and "selected" in rows[0] and "candidate" in rows[0]:
        s_hit = sum(r["candidate"]["hit"] for r in rows) / len(rows)
        s_size = sum(r["candidate"]["size"] for r in rows) / len(rows)
        v = out.get("selected", {})
        if s_hit and s_size and v:
            out["selected_vs_s"] = {"hit_share": round(v["hit"] / s_hit, 4),
                                    "size_share": round(v["size"] / s_size, 4)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exp", type=Path, default=Path(".talent/exp"))
    ap.add_argument("--runs", type=Path, default=Path("runs"))
    ap.add_argument("--metaqa", type=Path, default=Path("../shared/data/metaqa"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/llm_metaqa.json"))
    ap.add_argument("--baseline", type=Path, help="an --exp directory of ranked rows measured "
                    "with --planner none (reported as 'ranked, no planner')")
    args = ap.parse_args()
    hops = hop_index(args.metaqa)
    report: dict[str, Any] = {"training": {}, "eval": {}}
    for kind in ("retriever", "generator"):
        run = args.runs / f"metaqa-{kind}"
        if (run / "talent_meta.json").exists():
            report["training"][kind] = training(run, args.runs / f"{kind}.log")
    if args.out.exists():  # training runs no longer on disk: keep what was measured
        before = json.loads(args.out.read_text()).get("training", {})
        report["training"] = {**before, **report["training"]}
    sources = [(label, args.exp / name) for label, name in MODES.items()]
    if args.baseline:
        sources += [(label, args.baseline / name) for label, name in BASELINE.items()]
    for label, path in sources:
        if not path.exists():
            continue
        rows = read_rows(path)
        if label.startswith("ranked /") and any(r.get("plan") for r in rows):
            label = label.replace("ranked /", "ranked + planner /", 1)
        by_hop: dict[str, list[dict]] = {}
        for r in rows:
            by_hop.setdefault(f"{hops.get(' '.join(r['question'].split()), 0)}-hop", []).append(r)
        report["eval"][label] = {"all": summary(rows),
                                 **{h: summary(rs) for h, rs in sorted(by_hop.items())}}
    for name in ("full", "noretriever", "frozen"):  # MetaQA adapters on WebQSP-evidence
        for key, stem in (("webqsp", "webqsp_ranked"),  # + a planner trained on WebQSP
                          ("webqsp_planner", "webqsp_planner_ranked"),
                          ("webqsp_planner_cf", "webqsp_planner_cf_ranked")):  # cross-fitted
            path = args.exp / f"{stem}_{name}.jsonl"
            if path.exists():
                rows = read_rows(path)
                report.setdefault(key, {})[name] = summary(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))

    lines = ["| ablation | split | S Hit | S size | V̂ Hit | V̂ Recall | V̂ Precision | V̂ F1 | "
             "V̂ size | QA Hit@1 |", "|---|---|---|---|---|---|---|---|---|---|"]
    for label, parts in report["eval"].items():
        for split, s in parts.items():
            c, v = s.get("candidate", {}), s.get("selected")
            cells = [f"{v[k]:.3f}" for k in ("hit", "recall", "precision", "f1")] + \
                [f"{v['size']:.1f}"] if v else ["—"] * 5
            lines.append(f"| {label} | {split} | {c.get('hit', 0):.3f} | {c.get('size', 0):.1f} | "
                         + " | ".join(cells) + f" | {s.get('hit@1', float('nan')):.3f} |")
    print("\n".join(lines))
    print(json.dumps(report["training"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
