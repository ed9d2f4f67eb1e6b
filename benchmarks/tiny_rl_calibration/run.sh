#!/bin/bash
# usage: run.sh NAME SIZE METHOD VARIANT "extra --set args"
set -e
cd "${TINY_RUN:?set TINY_RUN to a folder where the tiny preset ran}"
NAME=$1; SIZE=$2; METHOD=$3; VARIANT=$4; EXTRA=$5
RD=${OUT:-/tmp/exp}/$NAME
export OMP_NUM_THREADS=1
rew='--set reward_funcs=["accuracy","format"] --set reward_weights=[1.0,1.0]'
[ $SIZE = large ] && rew='--set reward_funcs=["accuracy"] --set reward_weights=[1.0]'
start=$(date +%s)
cwgrpo train --model-dir ${MODEL:-results/tiny/models/$SIZE/base} --train-data ${TRAIN:-results/tiny/data/syn_train.jsonl} --run-dir $RD --set 'prompt_set="tiny"' --set use_cpu=true --set bf16=false --set gradient_checkpointing=false --set 'lr_scheduler_type="constant"' --set beta=0.0 --set 'loss_type="grpo"' --set num_generations=8 --set per_device_train_batch_size=8 --set gradient_accumulation_steps=4 --set max_completion_length=64 --set logging_steps=1 $rew --set "cw_method=\"$METHOD\"" --set "cw_variant=\"$VARIANT\"" --set seed=0 $EXTRA > $RD.train.log 2>&1
mid=$(date +%s)
ck=$(ls -d $RD/checkpoint-* | sort -t- -k2 -n | tail -1)
args=""
for b in syn_math500 syn_amc23 syn_olympiad; do args="$args --benchmark-file results/tiny/data/$b.jsonl --out $RD/eval/$b.jsonl --summary $RD/eval/$b.summary.json"; done
cwgrpo evaluate --model-dir $ck $args --set 'backend="transformers"' --set 'prompt_set="tiny"' --set k=1 --set temperature=0.6 --set top_p=0.95 --set max_new_tokens=64 --set limit=200 > $RD.eval.log 2>&1
end=$(date +%s)
echo "$NAME train $((mid-start))s eval $((end-mid))s $(python -c "
import json;print({b: json.load(open('$RD/eval/'+b+'.summary.json'))['avg_k'] for b in ['syn_math500','syn_amc23','syn_olympiad']})")"
