"""Compare `talent eval --rows` files of the SAME questions side by side: each one's summary
(overall and by MetaQA hop) and its paired Hit@1 difference to the first (bootstrap 95 % CI,
questions won / lost).

    python bench/paired_qa.py shipped=.talent/exp3/ship_ranked_full.jsonl \
        rank=.talent/exp3/rank_ranked_full.jsonl --out bench/results/llm_rank_loss.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from benchio import load_average, paired_difference, write_json_atomic  # noqa: E402
from llm_report import hop_index, summary  # noqa: E402


def read_rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", nargs="+", help="NAME=ROWS.jsonl; the first is the reference")
    ap.add_argument("--metaqa", type=Path, default=Path("../shared/data/metaqa"),
                    help="MetaQA dir, to split by hop (skipped when absent)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {}
    for item in args.rows:
        name, sep, path = item.partition("=")
        if not sep:
            raise SystemExit(f"{item}: expected NAME=PATH")
        runs[name] = read_rows(Path(path))
    ref_name, ref = next(iter(runs.items()))
    key = [r["id"] for r in ref]
    hops = hop_index(args.metaqa) if args.metaqa.is_dir() else {}
    out: dict = {"reference": ref_name, "files": dict(item.partition("=")[::2]
                                                       for item in args.rows),
                 "load_average_now": load_average(), "runs": {}}
    lines = ["| run | n | QA Hit@1 | 1 / 2 / 3-hop | vs " + ref_name + " (95 % CI) | won / lost |",
             "|---|---|---|---|---|---|"]
    for name, rows in runs.items():
        by_id = {r["id"]: r for r in rows}
        if set(by_id) != set(key):
            raise SystemExit(f"{name}: not the same questions as {ref_name}")
        by_hop: dict[str, list[dict]] = {}
        for r in rows:
            h = hops.get(" ".join(r["question"].split()), 0)
            by_hop.setdefault(f"{h}-hop", []).append(r)
        entry = {"all": summary(rows), **{h: summary(rs) for h, rs in sorted(by_hop.items())}}
        cell, wl = "—", "—"
        if name != ref_name:
            d = paired_difference([by_id[i]["hit@1"] for i in key],
                                  [r["hit@1"] for r in ref])
            entry["vs_reference"] = d
            cell = f"{d['diff']:+.3f} ({d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f})"
            wl = f"{d['wins']} / {d['losses']}"
        out["runs"][name] = entry
        per_hop = " / ".join(f"{entry.get(f'{h}-hop', {}).get('hit@1', float('nan')):.2f}"
                             for h in (1, 2, 3))
        lines.append(f"| {name} | {len(rows)} | {entry['all']['hit@1']:.3f} | {per_hop} | "
                     f"{cell} | {wl} |")
    write_json_atomic(args.out, out)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
