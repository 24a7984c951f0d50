"""Install trained ExplaGraphs (label-task) adapters into the package, where the stance task
finds them by task and base model: talent_core/adapters/<base>/explagraphs/<role>/ (float16
LoRA weights + talent_meta.json, no checkpoints; a graph-prompt generator, with its float16
graph module, goes to generator-graph/), with the validation figures of
bench/explagraphs_eval.py (``--val FILE``) recorded in the metadata.

    python bench/explagraphs_install.py --generator runs/explagraphs/generator \
        --retriever runs/explagraphs/retriever [--val runs/explagraphs/val.json]
    python bench/explagraphs_install.py --tune-bias VAL.json [--run trained:full] \
        [--target generator-graph]

``--tune-bias`` sets the installed generator's label offset (``ranking.bias_counter``,
`training.tune.choose_label_bias`: the best balanced accuracy) from a bench/explagraphs_eval.py
run on the VALIDATION part; the run's scores already hold the installed offset, so the
chosen one is added to it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from talent_core.llm.models import read_meta, write_meta
from talent_core.stance import LABEL_DIR

KEEP = ("adapter_config.json", "adapter_model.safetensors", "talent_meta.json")
GRAPH = ("graph_prompt.json", "graph_prompt.safetensors")  # a graph-prompt generator's module


def install(role: str, src: Path, val: dict | None) -> Path:
    from safetensors.torch import load_file, save_file

    from talent_core.pipeline import bundled_adapters_dir

    meta = read_meta(src)
    if meta.task != "label" or meta.kind != role:
        raise SystemExit(f"{src}: a {meta.kind} adapter for task {meta.task!r}, not a "
                         f"label-task {role}")
    graph = (src / GRAPH[1]).is_file()
    out = bundled_adapters_dir(meta.base_model) / LABEL_DIR / (role + ("-graph" if graph else ""))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in KEEP + (GRAPH if graph else ()):
        if name.endswith(".safetensors"):
            weights = {k: v.half().contiguous() for k, v in load_file(str(src / name)).items()}
            save_file(weights, str(out / name), metadata={"format": "pt"})
        else:
            shutil.copy2(src / name, out / name)
        (out / name).chmod(0o644)  # package data, readable by every user
    if val is not None:
        meta = read_meta(out)
        meta.metrics["stance_val"] = val
        write_meta(out, meta)
    return out


def tune_bias(path: Path, spec: str, target: str = "generator") -> dict:
    """Add the validation-chosen label offset to the installed generator's metadata."""
    from talent_core.config import Settings
    from talent_core.pipeline import bundled_adapters_dir
    from talent_core.training.tune import choose_label_bias, label_scores

    doc = json.loads(path.read_text())
    if "[validation]" not in doc["split"]:
        raise SystemExit(f"{path}: a run on {doc['split']}, not on the validation part")
    rows = [(r["scores"], r["gold"]) for r in doc["runs"][spec]["per_row"]]
    best = choose_label_bias(rows)
    out = bundled_adapters_dir(Settings(_env_file=None).base_model) / LABEL_DIR / target
    meta = read_meta(out)
    old = float(meta.ranking.get("bias_counter", 0.0))
    meta.ranking["bias_counter"] = round(old + best["bias"], 3)
    meta.metrics["label_bias_val"] = {"run": f"{doc['command']} [{spec}]", "n": len(rows),
                                      "before": label_scores(rows, 0.0), "after": best}
    write_meta(out, meta)
    return meta.metrics["label_bias_val"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--generator", type=Path)
    ap.add_argument("--retriever", type=Path)
    ap.add_argument("--val", type=Path, help="bench/explagraphs_eval.py output on validation")
    ap.add_argument("--tune-bias", type=Path, help="bench/explagraphs_eval.py validation run")
    ap.add_argument("--run", default="trained:full", help="its run to tune on")
    ap.add_argument("--target", default="generator", choices=["generator", "generator-graph"],
                    help="the installed generator whose offset is set")
    args = ap.parse_args()
    if args.tune_bias is not None:
        print(json.dumps(tune_bias(args.tune_bias, args.run, args.target)))
        return
    val = None
    if args.val is not None:
        doc = json.loads(args.val.read_text())
        val = {"split": doc["split"], "command": doc["command"],
               **{spec: {k: run[k] for k in ("n", "accuracy", "balanced_accuracy",
                                              "majority_baseline")}
                  for spec, run in doc["runs"].items()}}
    for role in ("retriever", "generator"):
        src = getattr(args, role)
        if src is not None:
            print(f"{role}: installed in {install(role, src, val)}")


if __name__ == "__main__":
    main()
