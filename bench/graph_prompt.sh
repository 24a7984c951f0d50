#!/usr/bin/env bash
# Issue 12: text-only vs graph-prompt vs both, same examples, same candidate, same training
# budget (SmolLM2-135M on CPU), at the full text budget and at a small one.
#   bash bench/graph_prompt.sh            # STAGES=data,train,eval (default all)
# Needs the MetaQA experiment of bench/llm_metaqa.sh (.talent/exp/*_h3.jsonl and
# runs/metaqa-retriever + the retriever selections cached in runs/metaqa-generator).
set -euo pipefail
cd "$(dirname "$0")/.."
EXP=${EXP:-.talent/exp}
OUT=${OUT:-runs/graph-prompt}
PER_HOP=${PER_HOP:-80}         # training questions per hop (from the generator's 600)
SMALL=${SMALL:-64}              # the small text budget (tokens of graph rows)
VARIANTS=${VARIANTS:-"text both graph text@$SMALL both@$SMALL"}
STAGES=${STAGES:-all}
want() { [[ $STAGES == all || ,$STAGES, == *,$1,* ]]; }
talent() { python -m talent_core "$@"; }
mkdir -p "$OUT"
if want data; then
  python - "$EXP/train600_h3.jsonl" "$OUT/train.jsonl" "$PER_HOP" <<'PY'
import sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(src).read().splitlines()  # 200 per hop, hop by hop
open(dst, "w").write("\n".join(lines[0:n] + lines[200:200 + n] + lines[400:400 + n]) + "\n")
PY
fi
if want train; then
  for v in $VARIANTS; do
    name=${v/@/-}
    opts=()
    case $v in
      both*|graph*) opts+=(--graph-prompt) ;;
    esac
    case $v in
      graph) opts+=(--text-budget 0) ;;
      *@*) opts+=(--text-budget "${v#*@}") ;;
    esac
    mkdir -p "$OUT/$name"
    # the trained retriever's ranked selections of these questions are already cached
    cp -n runs/metaqa-generator/retriever_selections.jsonl "$OUT/$name/" 2>/dev/null || true
    /usr/bin/time -v python -m talent_core train generator "$OUT/train.jsonl" \
      --val "$EXP/val_h3.jsonl" --retriever runs/metaqa-retriever --retriever-decode ranked \
      -o "$OUT/$name" --lr 4e-4 --epochs 1 --grad-accum 4 --lora-targets all-linear \
      --prompt-style named --dataset metaqa --k 10 --hops 3 --save-every 10 "${opts[@]}" \
      > "$OUT/$name.json" 2> "$OUT/$name.log"
  done
fi
