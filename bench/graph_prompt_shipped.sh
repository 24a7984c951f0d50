#!/usr/bin/env bash
# Issue 31: the shipped MetaQA graph-prompt generator
# (talent_core/adapters/smollm2-135m-instruct/generator-graph/), trained like the shipped text
# generator (bench/llm_metaqa.sh: the same split, LoRA r 8 / alpha 16 / all-linear, lr 4e-4,
# grad-accum 4, prompt style named, k 10, hops 3) plus G-Retriever's GNN soft prompt, on a
# CPU budget: PER_HOP training questions per hop (default 67: 201 examples) and contexts =
# all of S (--no-retriever) instead of the trained retriever's ranked selections; then
# installed (float16) and evaluated on the 300 held-out questions, planner on and off.
#
#   PATH=.venv/bin:$PATH TALENT_DATA_DIR=.talent/b/metaqa bash bench/graph_prompt_shipped.sh
#
# STAGES (default all): examples,train,install,eval,summary. The store must hold the MetaQA
# KB (`talent load ../shared/data/metaqa/kb.txt --format metaqa`); it is only read.
# The eval stage appends rows per question and resumes; LIMIT=N stops after the first N of
# the hop-interleaved order (a balanced prefix).
set -euo pipefail
cd "$(dirname "$0")/.."
EXP=${EXP:-.talent/exp2}
OUT=${OUT:-runs/gg}
PER_HOP=${PER_HOP:-67}
STAGES=${STAGES:-all}
DEST=talent_core/adapters/smollm2-135m-instruct/generator-graph
want() { [[ $STAGES == all || ,$STAGES, == *,$1,* ]]; }
talent() { python -m talent_core "$@"; }
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if want examples; then
  talent server start
  for s in train val; do
    talent examples "$EXP/$s.txt" --format metaqa --hops 3 -o "$OUT/${s}_h3.jsonl"
  done
  # train.txt holds 400 questions per hop, hop by hop: the first PER_HOP of each hop;
  # validation loss on the first 10 validation questions of each hop
  python - "$OUT" "$PER_HOP" <<'PY'
import sys
out, n = sys.argv[1], int(sys.argv[2])
t = open(f"{out}/train_h3.jsonl").read().splitlines()
open(f"{out}/train_gg.jsonl", "w").write("\n".join(t[0:n] + t[400:400 + n] + t[800:800 + n]) + "\n")
v = open(f"{out}/val_h3.jsonl").read().splitlines()
open(f"{out}/val30.jsonl", "w").write("\n".join(v[0:10] + v[30:40] + v[60:70]) + "\n")
PY
fi
if want train; then
  /usr/bin/time -v python -m talent_core train generator "$OUT/train_gg.jsonl" \
    --val "$OUT/val30.jsonl" --no-retriever -o "$OUT/generator-graph" \
    --lr 4e-4 --epochs 1 --grad-accum 4 --lora-targets all-linear --prompt-style named \
    --dataset metaqa --k 10 --hops 3 --graph-prompt --save-every 10 \
    > "$OUT/train.json" 2> "$OUT/train.log"
fi
if want install; then  # float16 weights, as bench/model_card.py installs the text generator
  python - "$OUT/generator-graph" "$DEST" <<'PY'
import shutil, sys
from pathlib import Path
from safetensors.torch import load_file, save_file
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
shutil.rmtree(dst, ignore_errors=True)
dst.mkdir(parents=True)
for name in ("adapter_config.json", "talent_meta.json", "graph_prompt.json"):
    shutil.copy2(src / name, dst / name)
for name in ("adapter_model.safetensors", "graph_prompt.safetensors"):
    w = {k: v.half().contiguous() for k, v in load_file(str(src / name)).items()}
    save_file(w, str(dst / name), metadata={"format": "pt"})
print(f"installed {dst}")
PY
fi
if want eval; then
  talent server start
  python bench/graph_prompt_shipped_eval.py "$EXP/test.txt" --out "$OUT/eval" \
    --variant gp-planner --variant gp-none ${LIMIT:+--limit "$LIMIT"}
fi
if want summary; then
  python bench/graph_prompt_shipped_eval.py "$EXP/test.txt" --out "$OUT/eval" \
    --summary bench/results/graph_prompt_shipped.json ${EXTRA:+--extra "$EXTRA"}
fi
