#!/bin/bash
cd "${TINY_RUN:?set TINY_RUN to a folder where the tiny preset ran}"; export OMP_NUM_THREADS=1
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=$1; REW=$2; EXTRA=$3; RD=${OUT:-/tmp/exp}/$NAME
python "$HERE/custom.py" train --model-dir ${MODEL:-results/tiny/models/small/base} --train-data ${OUT:-/tmp/exp}/train_l12.jsonl --run-dir $RD --set 'prompt_set="tiny"' --set use_cpu=true --set bf16=false --set gradient_checkpointing=false --set 'lr_scheduler_type="constant"' --set beta=0.0 --set 'loss_type="grpo"' --set num_generations=8 --set per_device_train_batch_size=32 --set gradient_accumulation_steps=4 --set max_completion_length=64 --set logging_steps=1 --set "reward_funcs=[\"$REW\"]" --set 'reward_weights=[1.0]' --set 'cw_method="grpo"' --set seed=0 --set temperature=0.7 --set learning_rate=${LR:-3e-4} --set max_steps=20 --set save_steps=20 $EXTRA > $RD.train.log 2>&1
python - <<PY
import json
from cwgrpo.models.sft import greedy_accuracy
from transformers import AutoTokenizer, AutoModelForCausalLM
rows=[json.loads(l) for l in open('$RD/metrics.jsonl')]
print('$NAME','train reward',[round(float(r['reward']),2) for r in rows])
test=[json.loads(l) for l in open('results/tiny/data/syn_math500.jsonl')][:100]
p='$RD/checkpoint-20'
print('$NAME greedy L1', greedy_accuracy(AutoModelForCausalLM.from_pretrained(p), AutoTokenizer.from_pretrained(p), test, 32))
PY
