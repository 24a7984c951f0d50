"""QA Hit@1 of several generators on the SAME candidates and the SAME retriever selections
(issue 12: text-only vs graph-prompt vs both, at full and small text budgets).

For each example (a `talent examples` JSONL: question, candidate S, gold answers) the trained
retriever's ranked V-hat is computed once (cached), then every generator variant answers by
ranked decoding exactly as `Pipeline.answer` does (candidate answers: the context's KG
nodes). Writes per-question rows and a summary JSON (Hit@1 overall and per hop, generator
latency, the part of it spent building the soft prompt, prompt tokens).

    python bench/graph_prompt_eval.py .talent/exp/test_h3.jsonl --per-hop 100 \
        --variant text=runs/graph-prompt/text --variant both=runs/graph-prompt/both \
        --out bench/results/graph_prompt_metaqa.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from benchio import load_average, write_json_atomic  # noqa: E402
from tqdm import tqdm  # noqa: E402

from talent_core.answer import kg_names  # noqa: E402
from talent_core.config import get_settings  # noqa: E402
from talent_core.embedding import get_embedder  # noqa: E402
from talent_core.evaluation.metrics import hit_at_1  # noqa: E402
from talent_core.llm.data import read_examples  # noqa: E402
from talent_core.llm.generator import GeneratorModel  # noqa: E402
from talent_core.llm.lm import LoadedLM  # noqa: E402
from talent_core.llm.retriever import RetrieverModel  # noqa: E402
from talent_core.pipeline import bundled_adapters_dir  # noqa: E402
from talent_core.training.selections import collect_selections  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", type=Path)
    ap.add_argument("--selections-only", action="store_true",
                    help="only compute (and cache) the retriever's selections")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=DIR[@BUDGET]",
                    help="a generator adapter; @BUDGET overrides its text budget")
    ap.add_argument("--retriever", type=Path, default=None,
                    help="retriever adapter (default: the bundled one)")
    ap.add_argument("--per-hop", type=int, default=None,
                    help="examples are grouped by hop, N per hop (MetaQA test files)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--selections", type=Path, default=None,
                    help="the retriever selections cache (default: beside --out)")
    args = ap.parse_args()

    settings = get_settings()
    examples = read_examples(args.examples)[: args.limit]
    rdir = args.retriever or bundled_adapters_dir(settings.base_model) / "retriever"
    variants: dict[str, tuple[Path, int | None]] = {}
    for spec in args.variant:
        name, _, rest = spec.partition("=")
        path, _, budget = rest.partition("@")
        variants[name] = (Path(path), int(budget) if budget else None)
    adapters: dict[str, Path] = {"retriever": rdir}
    slot = {}  # one adapter per directory, whatever its budgets
    for path, _ in variants.values():
        slot.setdefault(path, f"g{len(slot)}")
        adapters[slot[path]] = path
    embedder = get_embedder(settings.embedding_model, "cpu", settings.embed_batch_size)
    lm = LoadedLM(None, adapters, settings)
    retriever = RetrieverModel(lm, "retriever", None, settings.retriever_max_new_tokens)
    cache = args.selections or args.out.with_suffix(".selections.jsonl")
    meta = lm.metas["retriever"]
    selections = collect_selections(examples, retriever, cache, True,
                                    f"{lm.base_name}|{rdir}|{meta.created}", "ranked")
    if args.selections_only:
        return
    gens = {name: GeneratorModel(lm, slot[path], None, settings.generator_max_new_tokens,
                                 embed=embedder.encode, text_budget=budget)
            for name, (path, budget) in variants.items()}
    rows = []
    for i, (ex, sel) in enumerate(tqdm(list(zip(examples, selections, strict=True)),
                                       desc="answer", unit="q")):
        question = ex.candidate.question
        row = {"i": i, "question": question, "gold": ex.answers,
               "hop": (i // args.per_hop + 1) if args.per_hop else None,
               "s_hit": any(hit_at_1([n.name], ex.answers) for n in ex.candidate.nodes)}
        for name, gen in gens.items():
            t0 = time.perf_counter()
            rendered, context = gen.prompt(question, ex.candidate, sel)
            t_graph = 0.0
            if gen.prompter is not None:
                t1 = time.perf_counter()
                gen.soft_prompt(context)
                t_graph = (time.perf_counter() - t1) * 1000
            kg = kg_names(context, sel)
            scored = gen.rank(question, context, list(kg))
            answers = [kg.get(x.name, (x.name, None))[0] for x in gen.choose(scored)]
            ms = (time.perf_counter() - t0) * 1000 - t_graph  # the soft prompt built twice
            row[name] = {"answers": answers[:5], "hit1": hit_at_1(answers, ex.answers),
                         "ms": round(ms, 1), "graph_ms": round(t_graph, 2),
                         "prompt_tokens": lm.count_tokens(rendered.prompt),
                         "rows": len(context.nodes) + len(context.edges)}
        rows.append(row)

    def summary(rs: list[dict], name: str) -> dict:
        return {"n": len(rs), "hit1": round(statistics.fmean(r[name]["hit1"] for r in rs), 4),
                "ms_mean": round(statistics.fmean(r[name]["ms"] for r in rs), 1),
                "graph_ms_mean": round(statistics.fmean(r[name]["graph_ms"] for r in rs), 2),
                "prompt_tokens_mean": round(statistics.fmean(r[name]["prompt_tokens"]
                                                             for r in rs), 1),
                "rows_mean": round(statistics.fmean(r[name]["rows"] for r in rs), 2)}

    hops = sorted({r["hop"] for r in rows if r["hop"]})
    out = {
        "examples": str(args.examples), "n": len(rows), "retriever": str(rdir),
        "variants": {name: {"dir": str(p), "text_budget": gens[name].text_budget,
                            "type": gens[name].kind,
                            **summary(rows, name),
                            "by_hop": {h: summary([r for r in rows if r["hop"] == h], name)["hit1"]
                                       for h in hops}}
                     for name, (p, _) in variants.items()},
        "selected_mean": round(statistics.fmean(len(s.selected) for s in selections), 2),
        "base_model": lm.base_name,
    }
    out["load_average"] = load_average()
    write_json_atomic(args.out, out)
    with args.out.with_suffix(".rows.jsonl").open("w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(json.dumps({k: {m: v[m] for m in ("hit1", "by_hop", "ms_mean", "graph_ms_mean")}
                      for k, v in out["variants"].items()}, indent=1))


if __name__ == "__main__":
    main()
