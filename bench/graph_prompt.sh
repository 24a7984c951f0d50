#!/usr/bin/env bash
# Issue 12: text-only vs graph-prompt vs both, same examples, same candidate, same training
# budget (SmolLM2-135M on CPU), at the full text budget and at a small one.
#   PATH=.venv/bin:$PATH bash bench/graph_prompt.sh   # STAGES=data,train,eval (default all)
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
if want eval; then  # the same S and retriever V-hat for every generator (selections cached)
  E=(python bench/graph_prompt_eval.py)
  R=bench/results/graph_prompt
  mkdir -p "$R"
  # the shipped text generator (600 questions, 150 steps) beside the text one, for reference
  "${E[@]}" "$EXP/test_h3.jsonl" --per-hop 100 --selections "$R/metaqa.selections.jsonl" \
    --variant shipped=talent_core/adapters/smollm2-135m-instruct/generator \
    --variant text="$OUT/text" --out "$R/metaqa-text.json"
  for v in both graph text-64 both-64; do
    "${E[@]}" "$EXP/test_h3.jsonl" --per-hop 100 --selections "$R/metaqa.selections.jsonl" \
      --variant "${v/-/@}=$OUT/$v" --out "$R/metaqa-${v/-/}.json"
  done
  # WebQSP-evidence dev: `talent examples` on the WebQSP store (hops as configured)
  #   TALENT_DATA_DIR=.talent/webqsp talent examples \
  #     .talent/webqsp/questions/webqsp-evidence-dev.jsonl --format rog -o $EXP/webqsp_dev.jsonl
  "${E[@]}" "$EXP/webqsp_dev.jsonl" --selections "$R/webqsp.selections.jsonl" \
    --variant text="$OUT/text" --variant both="$OUT/both" --variant graph="$OUT/graph" \
    --out "$R/webqsp-a.json"
  "${E[@]}" "$EXP/webqsp_dev.jsonl" --selections "$R/webqsp.selections.jsonl" \
    --variant text@64="$OUT/text-64" --variant both@64="$OUT/both-64" --out "$R/webqsp-b.json"
  python bench/graph_prompt_table.py "$R"/metaqa-{text,both,graph,text64,both64}.json \
    -o bench/results/graph_prompt_metaqa.json
  python bench/graph_prompt_table.py "$R"/webqsp-{a,b}.json -o bench/results/graph_prompt_webqsp.json
fi
