"""Install trained adapters into the package and write their model card from the measured
figures (adapter metadata + bench/results/llm_metaqa.json); nothing is typed by hand.

    python bench/model_card.py --runs runs --install     # after training and tuning
    python bench/model_card.py --card                    # after the evaluation report

--install writes talent_core/adapters/<base>/{retriever,generator}/ (float16 LoRA weights +
talent_meta.json, without checkpoints); --card writes talent_core/adapters/<base>/MODEL_CARD.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from talent_core.llm.models import read_meta
from talent_core.pipeline import bundled_adapters_dir

KEEP = ("adapter_config.json", "adapter_model.safetensors", "talent_meta.json")


def _fmt(x: Any, nd: int = 3) -> str:
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def card(metas: dict[str, Any], results: dict[str, Any]) -> str:
    r, g = metas["retriever"], metas["generator"]
    lines = [
        f"# TaLenT adapters for {r.base_model} ({r.base_canonical})",
        "",
        "LoRA adapters of the TaLenT LLM retriever and generator, trained on MetaQA dev "
        "questions with candidate subgraphs S from this product's own retrieval "
        f"(k = {r.k}, hops = {r.hops}). Used by default by `talent ask`, `talent eval` and the "
        "UI (`TALENT_ADAPTERS=bundled`); `--adapters none` runs the frozen base model.",
        "",
        "## Data and split",
        "- MetaQA (Zhang et al., AAAI 2018; CC BY 3.0), dev files of the 1/2/3-hop sets: a "
        "seeded shuffle of each hop's qa_dev.txt (`bench/metaqa_split.py`): 334 training "
        "questions per hop (1,002), 30 validation per hop (90), 100 test per hop (300); no "
        f"question in two parts. The retriever trained on {r.metrics.get('examples')} "
        f"questions, the generator on {g.metrics.get('examples')} of them (balanced over hops).",
        "- The retriever's targets: gold answers present in S (weight 1, with the separator "
        f"after each), other nodes of S (weight lambda = {r.lam}), EOS weight {r.eos_weight}.",
        f"- The generator: SFT on the answers, contexts from the trained retriever's "
        f"{g.metrics.get('retriever_decode', 'free')} selections on the same questions.",
        "",
        "## Settings",
    ]
    for role, m in (("retriever", r), ("generator", g)):
        t, lo = m.train, m.lora
        lines.append(
            f"- {role}: LoRA r {lo.get('r')}, alpha {lo.get('alpha')}, dropout "
            f"{lo.get('dropout')}, targets {lo.get('targets')}; lr {t.get('lr')}, "
            f"{t.get('epochs')} epoch(s), batch {t.get('batch_size')} x accumulation "
            f"{t.get('grad_accum')}, warmup {t.get('warmup_ratio')}; prompt style "
            f"{m.prompt_style}; ranked decoding margin {m.ranking.get('margin')}"
            + (f", top {int(m.ranking['top_m'])}" if m.ranking.get("top_m") else "")
            + " (tuned on the validation split)")
    lines += ["", "## Training (2 CPU cores)", "",
              "| | examples | steps | tokens/example | s/step | total | peak RSS | loss first → "
              "last | validation loss |", "|---|---|---|---|---|---|---|---|---|"]
    for role, m in (("retriever", r), ("generator", g)):
        x = m.metrics
        lines.append(
            f"| {role} | {x.get('examples')} | {x.get('steps')} | {x.get('mean_tokens')} | "
            f"{x.get('seconds_per_step')} | {round(x.get('seconds_this_run', 0) / 60, 1)} min | "
            f"{round(x.get('peak_rss_mb', 0) / 1024, 2)} GB | {_fmt(x.get('first_loss'), 2)} → "
            f"{_fmt(x.get('final_loss'), 2)} | {_fmt(x.get('val_loss'), 3)} |")
    ev = results.get("eval", {})
    if ev:
        lines += ["", "## Held-out results (300 MetaQA dev questions, 100 per hop)", "",
                  "| decoding / ablation | n | S Hit / size | V̂ Hit / Recall / Precision / F1 / "
                  "size | QA Hit@1 (1 / 2 / 3-hop) |", "|---|---|---|---|---|"]
        for label, parts in ev.items():
            a = parts["all"]
            c, v = a.get("candidate", {}), a.get("selected")
            vh = (" / ".join(_fmt(v[k]) for k in ("hit", "recall", "precision", "f1"))
                  + f" / {v['size']:.1f}") if v else "—"
            hops = " / ".join(_fmt(parts.get(f"{h}-hop", {}).get("hit@1", float("nan")))
                              for h in (1, 2, 3))
            lines.append(f"| {label} | {a['n']} | {_fmt(c.get('hit'))} / {c.get('size', 0):.1f}"
                         f" | {vh} | **{_fmt(a.get('hit@1'))}** ({hops}) |")
    main = next(iter(ev.values()), {}).get("all", {})  # the default mode: ranked / full
    alone = next((v["all"] for k, v in ev.items() if k.startswith("ranked, no planner / full")),
                 None)
    share = main.get("selected_vs_s", {})
    lines += ["", "## Limits",
              f"- QA Hit@1 is {_fmt(main.get('hit@1'))} on held-out MetaQA in the default mode "
              "(ranked decoding with the shipped relation-path matcher, "
              "`talent_core/adapters/matcher/`)"
              + (f"; these adapters alone (`--planner none`) score {_fmt(alone.get('hit@1'))}, "
                 "far below trained KGQA systems (EmbedKGQA / NSM ~0.95-0.99, trained on 300k "
                 "questions)" if alone else "")
              + f". The retriever's V̂ keeps {_fmt(share.get('hit_share'), 2)} of S's Hit "
              f"with {_fmt(share.get('size_share'), 2)} of its nodes.",
              "- A 135M model trained on 1,002 questions: it answers the "
              "MetaQA question types it saw; other KGs (WebQSP/Freebase) and phrasings fare "
              "worse (see the README's WebQSP row).",
              "- Ranked decoding only answers with KG nodes: the generator's context and, "
              "with the planner, the ends of its planned relation paths; free decoding can "
              "name anything, as in the paper.",
              f"- Produced by `bench/llm_metaqa.sh`: the retriever at commit {r.git_commit}, "
              f"the generator at commit {g.git_commit}.",
              "",
              "## Other adapters in this folder",
              "- `generator-graph/`: the MetaQA graph-prompt generator (G-Retriever's soft "
              "prompt + LoRA), for `--generator-type graph-prompt` and the UI's *Generator* "
              "box; not the default. Its card: `MODEL_CARD_graph_prompt.md`.",
              "- `explagraphs/{retriever,generator,generator-graph}`: the ExplaGraphs "
              "(stance, label-task) adapters the stance task uses. Their card: "
              "`explagraphs/MODEL_CARD.md`."]
    return "\n".join(lines) + "\n"


def install(runs: Path, generator: Path | None = None) -> Path:
    """Copy the trained adapters (``runs/metaqa-{retriever,generator}``, or ``generator``)
    into the package, LoRA weights as float16 (half the size; evaluate the installed
    copies, which is what users run)."""
    from safetensors.torch import load_file, save_file

    dirs = {"retriever": runs / "metaqa-retriever",
            "generator": generator or runs / "metaqa-generator"}
    metas = {role: read_meta(d) for role, d in dirs.items()}
    dest = bundled_adapters_dir(metas["retriever"].base_model)
    for role in metas:
        out = dest / role
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for name in KEEP:
            src = dirs[role] / name
            if name.endswith(".safetensors"):
                weights = {k: v.half().contiguous() for k, v in load_file(str(src)).items()}
                save_file(weights, str(out / name), metadata={"format": "pt"})
            else:
                shutil.copy2(src, out / name)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=Path, default=Path("runs"))
    ap.add_argument("--results", type=Path, default=Path("bench/results/llm_metaqa.json"))
    ap.add_argument("--install", action="store_true", help="copy the adapters into the package")
    ap.add_argument("--generator", type=Path, default=None,
                    help="the generator adapter to install (default RUNS/metaqa-generator)")
    ap.add_argument("--card", action="store_true", help="write MODEL_CARD.md")
    args = ap.parse_args()
    if args.install:
        print(f"adapters installed in {install(args.runs, args.generator)}")
    if args.card:
        metas = {role: read_meta(bundled_adapters_dir("smollm2") / role)
                 for role in ("retriever", "generator")}
        dest = bundled_adapters_dir(metas["retriever"].base_model)
        results = json.loads(args.results.read_text()) if args.results.is_file() else {}
        (dest / "MODEL_CARD.md").write_text(card(metas, results))
        print(f"model card written to {dest / 'MODEL_CARD.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
