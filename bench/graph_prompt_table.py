"""Merge the `graph_prompt_eval.py` outputs of one dataset (several runs over the same
examples and cached selections) into one JSON and a markdown table, with each trained
variant's training figures from its adapter metadata.

    python bench/graph_prompt_table.py bench/results/graph_prompt/metaqa-*.json \
        -o bench/results/graph_prompt_metaqa.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from benchio import paired_difference, write_json_atomic  # noqa: E402


def training(adapter: Path) -> dict:
    meta_file = adapter / "talent_meta.json"
    if not meta_file.is_file():
        return {}
    meta = json.loads(meta_file.read_text())
    m = meta.get("metrics", {})
    keys = ("examples", "steps", "seconds_per_step", "seconds_this_run", "peak_rss_mb",
            "mean_tokens", "val_loss", "graph_parameters", "mean_graph_nodes")
    return {k: m.get(k) for k in keys if m.get(k) is not None} | {
        "text_budget": meta.get("text_budget")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    merged: dict = {"runs": [str(p) for p in args.runs], "variants": {}}
    for path in args.runs:
        run = json.loads(path.read_text())
        for key in ("examples", "n", "retriever", "selected_mean", "base_model"):
            if key in merged and merged[key] != run[key]:
                raise SystemExit(f"{path}: {key} differs from the other runs")
            merged[key] = run[key]
        for name, v in run["variants"].items():
            merged["variants"][name] = v | {"load_average": run.get("load_average"),
                                            "training": training(Path(v["dir"]))}
    hits: dict[str, dict[int, float]] = {}
    for path in args.runs:
        for line in path.with_suffix(".rows.jsonl").read_text().splitlines():
            row = json.loads(line)
            for name in merged["variants"]:
                if name in row:
                    hits.setdefault(name, {})[row["i"]] = row[name]["hit1"]
    # paired difference to the text generator at the same text budget (bootstrap 95 % CI)
    for name, v in merged["variants"].items():
        peer = next((p for p, w in merged["variants"].items() if w["type"] == "text"
                     and w["text_budget"] == v["text_budget"] and p != "shipped"), None)
        if peer is None or peer == name:
            continue
        ids = sorted(set(hits[name]) & set(hits[peer]))
        v["vs_text"] = {"peer": peer, **paired_difference([hits[name][i] for i in ids],
                                                          [hits[peer][i] for i in ids])}
    write_json_atomic(args.out, merged)
    lines = ["| generator | type | text budget | QA Hit@1 | by hop | generator ms (GNN ms) | "
             "prompt tokens | train s/step | peak RSS GB | val loss | vs text (95 % CI) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, v in merged["variants"].items():
        t, vs = v["training"], v.get("vs_text")
        budget = "all" if v["text_budget"] is None else v["text_budget"]
        hops = " / ".join(f"{x:.2f}" for x in v.get("by_hop", {}).values()) or "—"
        cmp = f"{vs['diff']:+.3f} ({vs['ci95'][0]:+.3f}, {vs['ci95'][1]:+.3f})" if vs else "—"
        rss = f"{t['peak_rss_mb'] / 1024:.1f}" if t.get("peak_rss_mb") else "—"
        val = f"{t['val_loss']:.1f}" if t.get("val_loss") else "—"
        cells = [name, v["type"], budget, f"**{v['hit1']:.3f}**", hops,
                 f"{v['ms_mean']:.0f} ({v['graph_ms_mean']:.1f})",
                 f"{v['prompt_tokens_mean']:.0f}", t.get("seconds_per_step", "—"), rss, val,
                 cmp]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    print(f"{merged['examples']}: n = {merged['n']}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
