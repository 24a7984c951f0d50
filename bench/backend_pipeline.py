"""The whole pipeline (retriever + generator + planner, the bundled adapters) through the
openai backend against the local one (issue 47): Hit@1 and per-stage latency of two
`talent eval --rows` runs on the same questions.

    python -m llama_cpp.server --config_file server.json &   # docs/own-model.md: smollm2,
                                                               # retriever, generator (LoRA)
    TALENT_DATA_DIR=.talent/b/metaqa talent eval Q --format metaqa --mode full --rows local.jsonl
    TALENT_LLM_BACKEND=openai TALENT_LLM_BASE_URL=http://127.0.0.1:8932/v1 \
        TALENT_DATA_DIR=.talent/b/metaqa talent eval Q ... --rows server.jsonl
    python bench/backend_pipeline.py metaqa=local.jsonl,server.jsonl \
        webqsp=local.jsonl,server.jsonl -o bench/results/backend_pipeline.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import load_average, write_json_atomic  # noqa: E402

STAGES = ("retrieve_total", "retrieve_plan_join", "retriever", "planner", "generator", "total")


def run(path: Path, only: set[str] | None = None) -> dict:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    rows = [r for r in rows if only is None or r["question"] in only]
    out: dict = {"rows": str(path), "questions": len(rows),  # "not in the KG": a miss
                 "hit@1": round(statistics.fmean(r.get("hit@1", 0.0) for r in rows), 4),
                 "not_in_kg": sum(1 for r in rows if r.get("not_in_kg"))}
    for stage in STAGES:
        xs = sorted(r["timings_ms"][stage] for r in rows if stage in r["timings_ms"])
        if xs:
            out[f"{stage}_ms_p50"] = round(xs[len(xs) // 2], 1)
    out["answers"] = {r["question"]: r.get("answer", [])[:3] for r in rows}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="NAME=LOCAL.jsonl,SERVER.jsonl")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    result = {"command": " ".join(sys.argv), "load_at_summary": load_average()}
    for pair in args.pairs:
        name, files = pair.split("=", 1)
        local_file, server_file = files.split(",")
        server = run(Path(server_file))
        local = run(Path(local_file), set(server["answers"]))  # the questions of both
        same = sum(local["answers"][q][:1] == server["answers"][q][:1]
                   for q in local["answers"])
        result[name] = {"local": local, "server": server, "same_first_answer": same}
        print(name, "local", local["hit@1"], "server", server["hit@1"], "same first", same)
    write_json_atomic(args.out, result)


if __name__ == "__main__":
    main()
