"""`talent train retriever|generator|tune-ranking|subgraphrag|planner` and
`talent annotate-explagraphs`: the commands read their inputs and call the training
functions of `talent_core.training`. The `talent` group imports this module only when one of
them runs (it imports torch).

Each prints one JSON summary line on success; bad input (a TalentError, said by the `talent`
group) exits with code 2 and a message naming the file and line.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from talent_core.commands.console import fail, setup_logging
from talent_core.commands.options import Verbose, model_options, option_name, with_options
from talent_core.config import RETRIEVER_MAX_NEW_TOKENS, get_settings
from talent_core.errors import RetrievalSettingsError
from talent_core.evaluation.provenance import sha256_file
from talent_core.llm.data import TrainingExample, read_examples, write_examples
from talent_core.llm.explagraphs import annotate, read_explagraphs, to_example
from talent_core.llm.lm import LoadedLM
from talent_core.llm.loading import load_models
from talent_core.llm.models import read_meta, write_meta
from talent_core.models import DECODES
from talent_core.pipeline import Pipeline
from talent_core.planning.self_train import SELF
from talent_core.questions import detect_question_format, read_question_files
from talent_core.retrieval.config import RetrievalConfig, apply_overrides
from talent_core.training import llm as llm_training
from talent_core.training import subgraphrag as scorer_training
from talent_core.training.trainer import TrainConfig
from talent_core.training.tune import tune

Examples = Annotated[Path, typer.Argument(help="training examples, JSONL of TrainingExample "
                                          "{question, candidate, answers[, gold_nodes]}",
                                          exists=True, dir_okay=False)]
Output = Annotated[Path, typer.Option("--output", "-o", help="adapter directory to write")]
Val = Annotated[Path | None, typer.Option("--val", help="validation examples (JSONL), for "
                                          "the validation loss", exists=True, dir_okay=False)]
BaseModelOpt = Annotated[str | None, typer.Option("--base-model", help="HF name, local path or "
                                                  "'smollm2' (default: TALENT_BASE_MODEL)")]
Resume = Annotated[bool, typer.Option("--resume/--no-resume", help="continue from the latest "
                                      "checkpoint in the output directory")]
Limit = Annotated[int | None, typer.Option(help="use only the first N examples")]
Device = Annotated[str | None, typer.Option(help="cuda, cpu, cuda:1 ... (default: cuda if "
                                            "available)")]

# The TrainConfig fields both train commands take, as options (`commands.options`):
# defaults from TrainConfig, help here; each command receives the given ones (and those of
# its own fields) as the dict `options`.
TRAIN_HELP = {
    "base_model": "HF name, local path or 'smollm2' (default: TALENT_BASE_MODEL)",
    "task": "kgqa (entity answers) or label (ExplaGraphs support/counter)",
    "epochs": "epochs (paper: 3)",
    "lr": "learning rate (paper: 5e-5)",
    "warmup_ratio": "warmup ratio (paper: 0.03)",
    "batch_size": "per-step batch (paper: 1)",
    "grad_accum": "gradient accumulation (paper: 8)",
    "max_length": "max tokens of prompt + target; rows of S are dropped to fit",
    "lora_r": "LoRA rank (paper: 8)",
    "lora_alpha": "LoRA alpha (paper: 16)",
    "lora_dropout": "LoRA dropout (paper: 0.05)",
    "lora_targets": "comma list of modules, or all-linear",
    "seed": "random seed",
    "max_steps": "stop after this many optimizer steps",
    "save_every": "checkpoint every N optimizer steps (0: never)",
    "gradient_checkpointing": "trade compute for memory (large models)",
    "device": "cuda, cpu, cuda:1 ... (default: cuda if available)",
    "dataset": "dataset name, recorded in the metadata",
    "k": "PCST k_v = k_e of the candidates (recorded)",
    "hops": "neighbourhood hops of the candidates (recorded)",
    "prompt_style": "paper (Appendix E.1/E.2 texts), compact (one-sentence instructions, ~30 "
                    "%% fewer tokens per example), named (compact, graph rows by name instead "
                    "of id) or paths (compact, each node as its relation paths from the "
                    "question's anchors); recorded in the adapter",
    "deepspeed": "DeepSpeed JSON config for the Trainer (multi-GPU; run under torchrun / "
                 "accelerate launch)",
    "lam": "weak-positive weight lambda (paper: 0.001 WebQSP, 0.01 CWQ/ExplaGraphs)",
    "eos_weight": "weight of the EOS token ending the target line (teaches where the list "
                  "stops; 0 = eq. 13 literally)",
    "rank_weight": "generator: weight of the ranking loss (softmax over the context's names "
                   "scored as ranked decoding scores them; -log of the gold names' share) "
                   "beside eq. 15's SFT loss; 0: eq. 15 alone (the paper)",
    "include_endpoints": "also list the other endpoint of each context edge as a node",
    "text_budget": "at most this many tokens of graph rows in the prompt (default: all that "
                   "fit; 0: none, the graph-prompt-only ablation); recorded in the adapter",
    "graph_prompt": "also train G-Retriever's graph soft prompt (GNN + projector over the "
                    "context's graph, prepended as soft tokens), saved beside the adapter",
    "graph_lr": "learning rate of the GNN and projector (they start from random weights)",
    "graph_layers": "graph prompt: TransformerConv layers",
    "graph_hidden": "graph prompt: GNN width",
    "graph_heads": "graph prompt: attention heads per layer",
    "graph_tokens": "graph prompt: soft tokens prepended",
}
GENERATOR_FIELDS = ("rank_weight", "include_endpoints", "text_budget", "graph_prompt", "graph_lr",
                    "graph_layers", "graph_hidden", "graph_heads", "graph_tokens")
SHARED_TRAIN_FIELDS = [k for k in TRAIN_HELP
                       if k not in ("lam", "eos_weight", *GENERATOR_FIELDS)]


def _train_options(*own: str):
    """The shared training options plus the command's ``own`` TrainConfig fields."""
    return with_options(model_options(TrainConfig, [*SHARED_TRAIN_FIELDS, *own],
                                      help=TRAIN_HELP), into="options")


def _load(path: Path, limit: int | None) -> list[TrainingExample]:
    examples = read_examples(path)
    if not examples:
        raise fail(f"{path}: no examples")
    return examples[:limit] if limit else examples


def _summary(meta: Any, output: Path) -> None:
    m = meta.metrics
    keys = ("examples", "steps", "first_loss", "final_loss", "val_loss", "seconds_per_step",
            "seconds_this_run", "peak_rss_mb", "peak_gpu_mb", "skipped_too_long")
    typer.echo(json.dumps({"adapter": str(output), "kind": meta.kind,
                           **{k: m[k] for k in keys if k in m}}))


@_train_options("lam", "eos_weight")
def train_retriever(
    examples: Examples,
    output: Output,
    val: Val = None,
    resume: Resume = True,
    limit: Limit = None,
    *,
    options: dict[str, Any],
) -> None:
    """Train the LLM retriever R_theta (LoRA, token-weighted NLL, paper eqs. 9-13)."""
    config = _config(options, output)
    train = _load(examples, limit)
    validation = _load(val, None) if val else None
    meta = llm_training.train_retriever(train, config, val_examples=validation, resume=resume)
    _summary(meta, output)


@_train_options(*GENERATOR_FIELDS)
def train_generator(
    examples: Examples,
    output: Output,
    retriever: Annotated[Path | None, typer.Option("--retriever", help="the TRAINED retriever "
                                                   "adapter whose selections form the "
                                                   "contexts", exists=True, file_okay=False)]
    = None,
    frozen_retriever: Annotated[bool, typer.Option("--frozen-retriever", help="contexts from "
                                                   "the base model without adapter "
                                                   "(ablation)")] = False,
    no_retriever: Annotated[bool, typer.Option("--no-retriever", help="contexts are all of S "
                                               "(ablation)")] = False,
    val: Val = None,
    retriever_max_new_tokens: Annotated[int, typer.Option(help="retriever output budget")]
    = RETRIEVER_MAX_NEW_TOKENS,
    retriever_decode: Annotated[str, typer.Option(help="how the retriever selects the "
                                                  f"training contexts: {' or '.join(DECODES)} (use "
                                                  "the decoding you will run)")] = "free",
    resume: Resume = True,
    limit: Limit = None,
    *,
    options: dict[str, Any],
) -> None:
    """Train the LLM generator G_phi (LoRA SFT, eq. 15) on the retriever's contexts."""
    if retriever_decode not in DECODES:
        raise fail(f"--retriever-decode must be {' or '.join(DECODES)}, not "
                    f"{retriever_decode!r}")
    chosen = sum([retriever is not None, frozen_retriever, no_retriever])
    if chosen != 1:
        raise fail("give exactly one of --retriever DIR, --frozen-retriever, --no-retriever")
    source = "trained" if retriever is not None else ("frozen" if frozen_retriever else "none")
    if retriever is not None:
        try:
            rmeta = read_meta(retriever)
        except (FileNotFoundError, ValueError) as e:
            raise fail(str(e)) from e
        options["base_model"] = options.get("base_model") or rmeta.base_model
        if options.get("task", "kgqa") == "kgqa":
            options["task"] = rmeta.task
    config = _config(options, output)
    train = _load(examples, limit)
    validation = _load(val, None) if val else None
    meta = llm_training.train_generator(
        train, config, retriever, source, val_examples=validation, resume=resume,
        retriever_max_new_tokens=retriever_max_new_tokens, retriever_decode=retriever_decode)
    _summary(meta, output)


def tune_ranking(
    val: Annotated[Path, typer.Argument(help="validation examples (JSONL of TrainingExample, "
                                        "from `talent examples`), not used in training",
                                        exists=True, dir_okay=False)],
    retriever: Annotated[Path, typer.Option("--retriever", help="trained retriever adapter",
                                            exists=True, file_okay=False)],
    generator: Annotated[Path | None, typer.Option("--generator", help="trained generator "
                                                   "adapter", exists=True, file_okay=False)]
    = None,
    coverage: Annotated[float, typer.Option(help="V-hat must keep this share of S's Hit")]
    = 0.97,
    report: Annotated[Path | None, typer.Option(help="write the curves here (JSON)")] = None,
    device: Device = None,
    limit: Limit = None,
) -> None:
    """Tune ranked decoding on a validation split (V-hat size vs coverage; the answer-set
    margin) and store the values in the adapters' metadata."""
    examples = _load(val, limit)
    r_model, g_model = load_models(None, retriever, generator, device=device)
    result = tune(examples, r_model, g_model if generator else None, coverage)
    for role, path in (("retriever", retriever), ("generator", generator)):
        if path is None:
            continue
        meta = read_meta(path)
        chosen = result[role]
        meta.ranking = {"margin": chosen["margin"], "top_m": chosen["top_m"] or 0}
        meta.metrics["ranking_val"] = {"examples": str(val), "n": result["n"],
                                       **{k: v for k, v in chosen["val"].items()}}
        write_meta(path, meta)
    if report is not None:
        report.write_text(json.dumps(result, indent=1) + "\n")
    typer.echo(json.dumps({"s_hit": result["s_hit"], "s_size": result["s_size"],
                           "retriever": result["retriever"],
                           "generator": result.get("generator")}))


def _config(options: dict[str, Any], output: Path) -> TrainConfig:
    """TrainConfig from the given options; a bad value exits 2 naming its option."""
    try:
        return TrainConfig(**options, output_dir=output)
    except ValidationError as e:
        raise fail("; ".join(f"{option_name(str(err['loc'][0]))}: {err['msg']} "
                              f"(got {err.get('input')!r})" for err in e.errors())) from e


def annotate_explagraphs(
    tsv: Annotated[Path, typer.Argument(help="ExplaGraphs TSV (arg1, arg2, label, graph)",
                                        exists=True, dir_okay=False)],
    cache: Annotated[Path, typer.Option(help="annotation cache (JSONL; re-runs reuse it)")],
    examples_out: Annotated[Path | None, typer.Option(help="also write TrainingExample JSONL "
                                                      "with the pseudo-gold nodes")] = None,
    base_model: BaseModelOpt = None,
    adapter: Annotated[Path | None, typer.Option(help="optional LoRA adapter for the "
                                                 "annotator", exists=True, file_okay=False)]
    = None,
    max_new_tokens: Annotated[int, typer.Option(help="annotator output budget")] = 64,
    device: Device = None,
    limit: Limit = None,
) -> None:
    """Pseudo-gold reasoning nodes for ExplaGraphs with an LLM (paper Appendix A.2)."""
    records = read_explagraphs(tsv)
    records = records[:limit] if limit else records
    adapters = {"annotator": adapter} if adapter else {}
    lm = LoadedLM(base_model, adapters, device=device)
    anns = annotate(records, lm, cache, "annotator" if adapter else None, max_new_tokens)
    if examples_out is not None:
        write_examples(examples_out, (to_example(r, a.nodes) for r, a in
                                      zip(records, anns, strict=True)))
    with_nodes = sum(1 for a in anns if a.nodes)
    typer.echo(json.dumps({
        "records": len(records), "with_nodes": with_nodes,
        "mean_nodes": round(sum(len(a.nodes) for a in anns) / max(1, len(anns)), 3),
        "cache": str(cache), "examples": str(examples_out) if examples_out else None,
    }))


def train_planner(
    questions: Annotated[list[Path] | None, typer.Argument(
        metavar="[QUESTIONS...]", help="labelled questions: relation-path label records "
        "(jsonl: id, split, question, q_entity, inferential_chain, ground_paths; split "
        "'validation' validates) or MetaQA question files (`question [topic]<TAB>answers`, "
        "typed by --metaqa-types)", exists=True, dir_okay=False)] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="matcher directory to write (--self: default the data "
        "dir's own, which `--planner bundled` then uses)")] = None,
    self_: Annotated[bool, typer.Option("--self", help="adapt the matcher to the loaded "
                                        "store from questions written from its own paths "
                                        "(no labels)")] = False,
    start: Annotated[Path | None, typer.Option(
        "--from", help="the matcher to start from (default: a fresh LoRA; --self: the "
        "shipped one)", exists=True, file_okay=False)] = None,
    metaqa_types: Annotated[Path | None, typer.Option(
        "--metaqa-types", help="MetaQA's directory (its {1,2,3}-hop/qa_dev_qtype.txt type "
        "the .txt question files)", exists=True, file_okay=False)] = None,
    val: Annotated[list[Path] | None, typer.Option(
        "--val", help="validation MetaQA question files (label records validate on their "
        "split 'validation')", exists=True, dir_okay=False)] = None,
    anchors: Annotated[int | None, typer.Option(min=1, help="--self: entities whose paths "
                                                "are written as questions (default "
                                                f"{SELF.anchors})")] = None,
    epochs: Annotated[int | None, typer.Option(
        min=1, help=f"(default 2; --self {SELF.epochs})")] = None,
    lr: Annotated[float | None, typer.Option(min=0.0, help="learning rate, of the matcher "
                                             "and of --rerank's re-ranker (default 3e-4; "
                                             f"--self {SELF.lr:g})")] = None,
    rank: Annotated[int, typer.Option(min=1, help="LoRA rank of a fresh matcher")] = 16,
    alpha: Annotated[float, typer.Option(min=0.0, help="LoRA alpha of a fresh matcher")
                     ] = 32.0,
    mine: Annotated[int, typer.Option(min=0, help="labelled questions: from the second "
                                      "epoch on, also contrast each question with one of "
                                      "the K training paths the matcher being fitted ranks "
                                      "highest among its wrong ones (0: none)")] = 0,
    name: Annotated[str | None, typer.Option(help="the matcher's name (default: the output "
                                             "directory's)")] = None,
    rerank: Annotated[bool, typer.Option(
        "--rerank", help="labelled questions: fit the path re-ranker after the matcher, on "
        "the same questions (--self adapts the one its start has)")] = False,
    verbose: Verbose = False,
) -> None:
    """Train the question <-> relation-path matcher the planner ranks paths with (`--planner
    DIR` on ask / eval / app), from labelled questions or (--self) from the loaded store."""
    from talent_core.planning.plan import SELF_DIR
    from talent_core.training import matcher as matcher_training

    setup_logging(verbose)
    if alpha <= 0 or (lr is not None and lr <= 0):  # 0 would train nothing (or be the default)
        raise fail(f"--alpha and --lr must be above 0 (got alpha {alpha}, lr {lr})")
    settings = get_settings()
    if self_:
        if questions:
            raise fail("--self writes its own questions: give no QUESTIONS")
        if rerank or mine:
            raise fail("--rerank and --mine are for labelled questions: --self adapts the "
                       "re-ranker its start has, against its anchors' own paths")
        out = output or settings.data_dir / SELF_DIR
        meta = matcher_training.fit_self(settings, out, start=start, anchors=anchors,
                                         epochs=epochs, lr=lr, name=name or "self")
    else:
        if not questions:
            raise fail("give QUESTIONS (label records or MetaQA files), or --self")
        if output is None:
            raise fail("--output DIR: where to write the matcher")
        pairs, val_pairs = matcher_training.read_pairs(questions, metaqa_types, val or [])
        meta = matcher_training.fit_matcher(
            pairs, output, name=name or output.name, base_model=settings.embedding_model,
            settings=matcher_training.FitSettings(epochs=epochs or 2,
                                                  lr=lr or matcher_training.FitSettings.lr,
                                                  rank=rank, alpha=alpha, mine=mine),
            val=val_pairs,
            trained_on={"files": [p.name for p in questions]}, init=start,
            progress=matcher_training.log_progress)
        out = output
        if rerank:
            from talent_core.training.reranker import RerankSettings, fit_rerank_after

            fit_rerank_after(pairs, output, settings.embedding_model, init=output,
                             epochs=epochs or 2, lr=lr or RerankSettings.lr)
    from talent_core.planning.reranker import RERANKER_DIR

    typer.echo(json.dumps({"matcher": str(out), "trained_on": meta["trained_on"],
                           "reranker": (str(out / RERANKER_DIR)
                                        if (out / RERANKER_DIR).is_dir() else None),
                           "training": meta["training"],
                           "validation": meta.get("validation")}))


@with_options(model_options(scorer_training.ScorerTrainConfig), into="options")
@with_options(model_options(RetrievalConfig, scorer_training.RETRIEVAL_FIELDS),
              into="retrieval")
def train_subgraphrag(
    questions: Annotated[list[Path], typer.Argument(
        metavar="QUESTIONS...", help="training question files with gold answers (MetaQA "
        "`question [topic]<TAB>a1|a2`, or RoG jsonl)", exists=True, dir_okay=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="scorer directory to write "
                                         "(also holds the example cache and the resume state)")],
    val: Annotated[Path | None, typer.Option("--val", help="validation questions (default: a "
                                             "held-out share of QUESTIONS)", exists=True,
                                             dir_okay=False)] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="metaqa | rog (default: guessed "
                                            "from each file name)")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="use only the first N training "
                                              "questions")] = None,
    resume: Annotated[bool, typer.Option("--resume/--no-resume", help="continue from DIR's "
                                         "training state")] = True,
    verbose: Verbose = False,
    *,
    options: dict[str, Any],
    retrieval: dict[str, Any],
) -> None:
    """Train SubgraphRAG's triple scorer (MLP + directional distance encoding) on the
    questions' neighbourhoods in the configured store; `--method subgraphrag --scorer DIR`
    uses it."""
    setup_logging(verbose)
    scorer_training.log.setLevel(logging.INFO)  # epochs are always reported
    try:
        config = scorer_training.ScorerTrainConfig(**options)
        rcfg = apply_overrides(RetrievalConfig(), **retrieval)
    except (ValueError, RetrievalSettingsError) as e:
        raise fail(str(e)) from None

    train_recs = read_question_files(questions, fmt, limit)
    val_recs = read_question_files([val], fmt) if val else None
    if not train_recs:
        raise fail("no training questions")
    if val_recs is None:  # a seeded held-out share
        train_recs, val_recs = scorer_training.hold_out(train_recs, config)
    overlap = {r.question for r in train_recs} & {r.question for r in val_recs}
    if overlap:
        scorer_training.log.warning("%d validation questions also occur in training", len(overlap))

    qfmt = fmt or detect_question_format(questions[0])
    files = [{"file": p.name, "sha256": sha256_file(p)} for p in questions]
    pipe = Pipeline(retrieval=rcfg, question_format=qfmt)  # type: ignore[arg-type]
    try:
        final = scorer_training.fit_scorer(
            train_recs, val_recs, pipe.store, pipe.embedder, pipe.retrieval_config(), config,
            output, resume=resume, files=files, val_file=val.name if val else None)
    finally:
        pipe.close()
    v = final["validation"]
    t = final["training"]
    typer.echo(json.dumps({
        "scorer": str(output), "train_questions": t["questions"], "trained_on": t["trained_on"],
        "val_questions": final["validation_set"]["questions"], "epochs_run": final["epochs_run"],
        "best_epoch": final["best_epoch"], "stopped_by": final.get("stopped_by"),
        **{k: v[k] for k in v if k.startswith(("ans_recall", "hit", "gold_recall"))},
        "build_s": final["build_s"], "train_s": final["train_s"],
        "peak_rss_mb": final["peak_rss_mb"],
    }))
