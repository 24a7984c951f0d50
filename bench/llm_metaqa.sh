#!/usr/bin/env bash
# Issue 8's MetaQA LLM experiment on CPU with SmolLM2-135M (TALENT_BASE_MODEL=smollm2):
#   split (1,800 train balanced over hops / 90 val / 300 test) -> candidates (k=10, hops=3)
#   -> train retriever (LoRA, token-weighted NLL, separators weighted; 1,002 of the training
#   questions) -> tune its ranked V-hat on val -> train generator (all 1,800) on the trained
#   retriever's RANKED selections -> tune the
#   answer margin on val -> evaluate {ranked, free} x {full, no retriever, frozen retriever}
#   on the 300 held-out questions -> bench/results/llm_metaqa.json.
# About 3 h on 2 CPU cores (retriever ~56 min, generator ~60 min).
#
#   METAQA=../shared/data/metaqa bash bench/llm_metaqa.sh
#
# Needs MetaQA loaded into $TALENT_DATA_DIR first:
#   TALENT_DATA_DIR=.talent/metaqa talent load $METAQA/kb.txt --format metaqa
# STAGES (default "all") picks steps:
#   split,examples,retriever,tune1,generator,tune2,planner,tune3,install,eval,webqsp,report
# planner: the relation-path planner (talent train planner: the 1,800 training questions plus
# train_types.txt, 34 more of the question types the draw held fewer than 10 times);
# tune3: its answer weight w on the validation questions (ranked full + no retriever rows,
# bench/planner_weight.py --write); install also copies it into the package.
set -euo pipefail
cd "$(dirname "$0")/.."
METAQA=${METAQA:-../shared/data/metaqa}
EXP=${EXP:-.talent/exp}
RUNS=${RUNS:-runs}
export TALENT_DATA_DIR=${TALENT_DATA_DIR:-.talent/metaqa}
STAGES=${STAGES:-all}
FREE_PER_HOP=${FREE_PER_HOP:-100}  # free decoding is slow on CPU: first N test questions per hop
TRAIN_OPTS=(--lr 4e-4 --epochs 1 --grad-accum 4 --lora-targets all-linear
            --dataset metaqa --k 10 --hops 3 --save-every 50)
# the retriever reads S with ids (compact instructions); the generator reads its context with
# names in the edge rows ("named": +20 points of Hit@1 over "compact" on 90 test questions)
RETRIEVER_STYLE=${RETRIEVER_STYLE:-compact}
GENERATOR_STYLE=${GENERATOR_STYLE:-named}
# the generator's ranking loss beside eq. 15 (0: SFT alone, the paper)
RANK_WEIGHT=${RANK_WEIGHT:-0}  # 10 measured: no gain (bench/results/llm_rank_loss.json)
talent() { python -m talent_core "$@"; }
want() { [[ $STAGES == all || ,$STAGES, == *,$1,* ]]; }
mkdir -p "$EXP" "$RUNS"

if want split; then
  python bench/metaqa_split.py --metaqa "$METAQA" --out "$EXP" --train 400 --val 30 --test 100 \
    --extra 200 --cover-types 10
fi
talent server start
if want examples; then
  for s in train train_extra val test; do
    talent examples "$EXP/$s.txt" --format metaqa --hops 3 -o "$EXP/${s}_h3.jsonl"
  done
  # 334 training questions per hop (1,002): the first 334 of each hop's 400
  python - "$EXP" <<'PY'
import sys
e = sys.argv[1]
lines = open(f"{e}/train_h3.jsonl").read().splitlines()
open(f"{e}/train1k_h3.jsonl", "w").write("\n".join(lines[0:334] + lines[400:734] + lines[800:1134]) + "\n")
# GEN_TRAIN=train600: the first 200 of each hop's 334 (the earlier, smaller generator run)
open(f"{e}/train600_h3.jsonl", "w").write("\n".join(lines[0:200] + lines[400:600] + lines[800:1000]) + "\n")
# GEN_TRAIN=train1800: all 1,200 training questions and the 600 extra ones (600 per hop)
extra = open(f"{e}/train_extra_h3.jsonl").read().splitlines()
open(f"{e}/train1800_h3.jsonl", "w").write("\n".join(lines + extra) + "\n")
PY
fi
if want retriever; then
  /usr/bin/time -v python -m talent_core train retriever "$EXP/train1k_h3.jsonl" \
    --val "$EXP/val_h3.jsonl" -o "$RUNS/metaqa-retriever" --lam 0.01 "${TRAIN_OPTS[@]}" \
    --prompt-style "$RETRIEVER_STYLE" \
    2> "$RUNS/retriever.log"
fi
if want tune1; then
  talent train tune-ranking "$EXP/val_h3.jsonl" --retriever "$RUNS/metaqa-retriever" \
    --report "$EXP/tune_retriever.json"
fi
if want generator; then
  /usr/bin/time -v python -m talent_core train generator "$EXP/${GEN_TRAIN:-train1800}_h3.jsonl" \
    --val "$EXP/val_h3.jsonl" --retriever "$RUNS/metaqa-retriever" --retriever-decode ranked \
    -o "$RUNS/metaqa-generator" "${TRAIN_OPTS[@]}" --prompt-style "$GENERATOR_STYLE" \
    --rank-weight "$RANK_WEIGHT" \
    2> "$RUNS/generator.log"
fi
if want tune2; then
  talent train tune-ranking "$EXP/val_h3.jsonl" --retriever "$RUNS/metaqa-retriever" \
    --generator "$RUNS/metaqa-generator" --report "$EXP/tune.json"
fi
if want planner; then
  /usr/bin/time -v python -m talent_core train planner "$EXP/train.txt" "$EXP/train_extra.txt" \
    "$EXP/train_types.txt" \
    --val "$EXP/val.txt" --format metaqa -o "$RUNS/planner-metaqa" --name metaqa \
    2> "$RUNS/planner.log"
fi
if want tune3; then
  for m in full no-retriever; do
    talent eval "$EXP/val.txt" --format metaqa --hops 3 --mode $m --decode ranked \
      --planner "$RUNS/planner-metaqa" --rows "$EXP/val_planner_$m.jsonl"
  done
  python bench/planner_weight.py "$EXP/val_planner_full.jsonl" \
    "$EXP/val_planner_no-retriever.jsonl" --planner "$RUNS/planner-metaqa" --write \
    --out bench/results/planner_weight.json
fi
if want install; then  # the evaluation runs the installed (float16) copies users get
  python bench/model_card.py --runs "$RUNS" --install
  if [[ -f "$RUNS/planner-metaqa/planner.json" ]]; then
    mkdir -p talent_core/adapters/planner/metaqa
    cp "$RUNS/planner-metaqa/planner.json" "$RUNS/planner-metaqa/planner.npz" \
      talent_core/adapters/planner/metaqa/
  fi
fi
if want eval; then
  # free decoding: the first FREE_PER_HOP test questions of each hop (balanced subset)
  python - "$EXP" "$FREE_PER_HOP" <<'PY'
import sys
e, n = sys.argv[1], int(sys.argv[2])
lines = [x for x in open(f"{e}/test.txt").read().splitlines() if x.strip()]
open(f"{e}/test_free.txt", "w").write("\n".join(lines[0:n] + lines[100:100 + n] + lines[200:200 + n]) + "\n")
PY
  for decode in ranked free; do
    test="$EXP/test.txt"; [[ $decode == free ]] && test="$EXP/test_free.txt"
    talent eval "$test" --format metaqa --hops 3 --mode full --decode $decode \
      --rows "$EXP/eval_${decode}_full.jsonl"
    talent eval "$test" --format metaqa --hops 3 --mode no-retriever --decode $decode \
      --rows "$EXP/eval_${decode}_noretriever.jsonl"
    talent eval "$test" --format metaqa --hops 3 --mode full --decode $decode \
      --frozen-retriever \
      --rows "$EXP/eval_${decode}_frozen.jsonl"
  done
fi
if want webqsp; then  # the MetaQA-trained adapters on WebQSP-evidence (Freebase), ranked
  WQ=${WEBQSP:-../shared/data/webqsp-evidence/dev.jsonl}
  export TALENT_DATA_DIR=.talent/webqsp
  [[ -f .talent/webqsp/questions/webqsp-evidence-dev.jsonl ]] || talent load "$WQ" --format rog
  talent server start
  for m in full:full no-retriever:noretriever frozen:frozen; do
    mode=${m%%:*}; name=${m##*:}; extra=()
    [[ $mode == frozen ]] && { mode=full; extra=(--frozen-retriever); }
    talent eval .talent/webqsp/questions/webqsp-evidence-dev.jsonl --format rog --hops 2 \
      --mode $mode --decode ranked "${extra[@]}" --limit "${WEBQSP_LIMIT:-400}" \
      --rows "$EXP/webqsp_ranked_$name.jsonl"
  done
  talent server stop
  export TALENT_DATA_DIR=.talent/metaqa
fi
if want report; then
  python bench/llm_report.py --exp "$EXP" --runs "$RUNS" --metaqa "$METAQA" \
    --out bench/results/llm_metaqa.json
  python bench/model_card.py --card
fi
