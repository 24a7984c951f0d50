#!/usr/bin/env bash
# The MetaQA LLM experiment of issue 4, CPU, SmolLM2-135M (TALENT_BASE_MODEL=smollm2):
# split -> candidates (k=10, hops=3) -> train retriever -> train generator on the TRAINED
# retriever's selections -> evaluate full / frozen retriever / no retriever on held-out
# questions -> bench/results/llm_metaqa.json. About 2.5 h on 2 CPU cores.
#
#   METAQA=../shared/data/metaqa bash bench/llm_metaqa.sh
#
# Needs MetaQA loaded into $TALENT_DATA_DIR first:
#   TALENT_DATA_DIR=.talent/metaqa talent load $METAQA/kb.txt --format metaqa
set -euo pipefail
cd "$(dirname "$0")/.."
METAQA=${METAQA:-../shared/data/metaqa}
EXP=${EXP:-.talent/exp}
RUNS=${RUNS:-runs}
export TALENT_DATA_DIR=${TALENT_DATA_DIR:-.talent/metaqa}
EPOCHS=${EPOCHS:-3}
LR=${LR:-5e-4}
LAM=${LAM:-0.01}
talent() { python -m talent_core "$@"; }
mkdir -p "$EXP" "$RUNS"

# 1. split each hop's dev file with a seeded shuffle: 100 train, 67 test, 10 validation
python - "$METAQA" "$EXP" <<'EOF'
import random, sys
from pathlib import Path
src, exp = Path(sys.argv[1]), Path(sys.argv[2])
parts = {"train": [], "test": [], "val": []}
for h in (1, 2, 3):
    lines = [l for l in (src / f"{h}-hop" / "qa_dev.txt").read_text().splitlines() if l.strip()]
    random.Random(h).shuffle(lines)
    parts["train"] += lines[:100]; parts["test"] += lines[100:167]; parts["val"] += lines[167:177]
for name, lines in parts.items():
    (exp / f"{name}.txt").write_text("\n".join(lines) + "\n")
assert not set(parts["train"]) & set(parts["test"]) and not set(parts["val"]) & set(parts["test"])
EOF

talent server start
# 2. candidates S for every question (the same retrieval the pipeline runs)
for s in train val test; do
  talent examples "$EXP/$s.txt" --format metaqa --hops 3 -o "$EXP/${s}_h3.jsonl"
done

# 3. retriever (token-weighted NLL), then 4. generator on the trained retriever's selections
/usr/bin/time -v python -m talent_core train retriever "$EXP/train_h3.jsonl" \
  --val "$EXP/val_h3.jsonl" -o "$RUNS/metaqa-retriever" --lam "$LAM" --lr "$LR" \
  --epochs "$EPOCHS" --dataset metaqa --k 10 --hops 3 --save-every 50 2> "$RUNS/retriever.log"
/usr/bin/time -v python -m talent_core train generator "$EXP/train_h3.jsonl" \
  --val "$EXP/val_h3.jsonl" --retriever "$RUNS/metaqa-retriever" -o "$RUNS/metaqa-generator" \
  --lr "$LR" --epochs "$EPOCHS" --dataset metaqa --k 10 --hops 3 --save-every 50 \
  2> "$RUNS/generator.log"

# 5. held-out evaluation: full, frozen retriever (no --retriever), no retriever
talent eval "$EXP/test.txt" --format metaqa --hops 3 --mode full \
  --retriever "$RUNS/metaqa-retriever" --generator "$RUNS/metaqa-generator" \
  --rows "$EXP/eval_full.jsonl"
talent eval "$EXP/test.txt" --format metaqa --hops 3 --mode no-retriever \
  --generator "$RUNS/metaqa-generator" --rows "$EXP/eval_noretriever.jsonl"
talent eval "$EXP/test.txt" --format metaqa --hops 3 --mode full \
  --generator "$RUNS/metaqa-generator" --rows "$EXP/eval_frozen.jsonl"

python bench/llm_report.py --exp "$EXP" --runs "$RUNS" --metaqa "$METAQA" \
  --out bench/results/llm_metaqa.json
