#!/bin/bash
cd "${TINY_RUN:?set TINY_RUN to a folder where the tiny preset ran}"; export OMP_NUM_THREADS=1
SIZE=$1; RD=${OUT:-/tmp/exp}/base_$SIZE; args=""
for b in syn_math500 syn_amc23 syn_olympiad; do args="$args --benchmark-file results/tiny/data/$b.jsonl --out $RD/eval/$b.jsonl --summary $RD/eval/$b.summary.json"; done
cwgrpo evaluate --model-dir ${MODEL:-results/tiny/models/$SIZE/base} $args --set 'backend="transformers"' --set 'prompt_set="tiny"' --set k=1 --set temperature=0.6 --set top_p=0.95 --set max_new_tokens=64 --set limit=200 > $RD.eval.log 2>&1
echo "base_$SIZE $(python -c "
import json;print({b: json.load(open('$RD/eval/'+b+'.summary.json'))['avg_k'] for b in ['syn_math500','syn_amc23','syn_olympiad']})")"
