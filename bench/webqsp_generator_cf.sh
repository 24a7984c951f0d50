#!/usr/bin/env bash
# Issue 29: does a generator trained on WebQSP dev questions help? Cross-fitted: the 400
# dev questions split by alternate lines into A and B, a text generator trained on each
# half (the shipped retriever's ranked selections as contexts, the shipped generator's
# settings, 2 epochs), each half answered with the other half's generator under default
# settings; compared per question with a default run's rows (DEFAULT_ROWS).
#   TALENT_DATA_DIR=.talent/b/webqsp DEFAULT_ROWS='runs/wq/default.*.jsonl' \
#       bash bench/webqsp_generator_cf.sh            (about 45 min on 2 cores)
set -euo pipefail
Q=${Q:-.talent/b/webqsp/questions/webqsp-evidence-dev.jsonl}
OUT=${OUT:-runs/wq}
ADAPTERS=talent_core/adapters/smollm2-135m-instruct
mkdir -p "$OUT"
sed -n '1~2p' "$Q" > "$OUT/foldA.jsonl"
sed -n '2~2p' "$Q" > "$OUT/foldB.jsonl"
for F in A B; do
  talent examples "$OUT/fold$F.jsonl" --format rog -o "$OUT/ex$F.jsonl"
done
for F in A B; do
  OMP_NUM_THREADS=1 talent train generator "$OUT/ex$F.jsonl" --retriever "$ADAPTERS/retriever" \
    --retriever-decode ranked -o "$OUT/gen$F" --epochs 2 --lr 4e-4 --grad-accum 4 \
    --lora-targets all-linear --prompt-style named --dataset webqsp --hops 3 \
    > "$OUT/gen$F.log" 2>&1 &
done
wait
OMP_NUM_THREADS=1 talent eval "$OUT/foldA.jsonl" --format rog --mode full \
  --generator "$OUT/genB" --rows "$OUT/cfgen.A.jsonl" > "$OUT/cfgen.A.log" 2>&1 &
OMP_NUM_THREADS=1 talent eval "$OUT/foldB.jsonl" --format rog --mode full \
  --generator "$OUT/genA" --rows "$OUT/cfgen.B.jsonl" > "$OUT/cfgen.B.log" 2>&1 &
wait
python bench/webqsp_planner.py --run default="${DEFAULT_ROWS:?set DEFAULT_ROWS to a default run rows glob}" \
  --run cross_fitted_generator="$OUT/cfgen.*.jsonl" \
  --out bench/results/webqsp_generator_crossfit.json \
  --note "cross-fitted WebQSP-trained generator (bench/webqsp_generator_cf.sh)"
