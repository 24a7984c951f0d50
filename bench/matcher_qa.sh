#!/usr/bin/env bash
# QA under a planner (issue 45), two `talent eval` processes of half the questions each
# (OMP_NUM_THREADS=1), rows under .talent/qa/NAME.{0,1}.jsonl:
#   bash bench/matcher_qa.sh NAME PLANNER DATA_DIR QUESTIONS FORMAT COUNT
# e.g. bash bench/matcher_qa.sh mq-both talent_core/adapters/matcher .talent/b/metaqa \
#        .talent/exp2/test.txt metaqa 300
# then: python bench/webqsp_planner.py --run NAME='.talent/qa/NAME.*.jsonl' [--per-hop 100]
set -euo pipefail
name=$1 planner=$2 data=$3 questions=$4 fmt=$5 count=$6
half=$(( (count + 1) / 2 ))
mkdir -p .talent/qa
for i in 0 1; do
  OMP_NUM_THREADS=1 TALENT_DATA_DIR=$data TALENT_MODEL_SERVER_IDLE_TIMEOUT=0 \
    talent eval "$questions" --format "$fmt" --mode full --planner "$planner" \
    --offset $(( i * half )) --limit "$half" --rows ".talent/qa/$name.$i.jsonl" \
    > ".talent/qa/$name.$i.log" 2>&1 &
done
wait
