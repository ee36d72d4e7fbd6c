#!/bin/bash
# More full-data epochs for the QA models (issue 27) on a lent GPU. The shipped stage 1 saw all of
# SQuAD 1.1 once (one epoch, 7.5 h on 2 cores); this continues both stage-1 models for up to 2 more
# epochs (lr 5e-5, warm-up and decay), then repeats the shipped second stage (SQuAD 2.0 files only,
# removed-answer negatives 0.5, 1 epoch, lr 3e-5). train-qa keeps the best epoch by validation.
# First, here: experiments/gpu/device_trip.sh untrack 1, and carry .gpu: .gpu/stage1.tar.xz (the stage-1
# baseline and the stage-1 pruned model without its word embeddings, which are the baseline's),
# .gpu/tf-slim.tar.xz (transformers 4.57.6 with only the bert/auto/encoder_decoder models: the full
# wheel does not fit the trip beside the weights), .gpu/whl (huggingface_hub), .gpu/squad*.tar.xz.
#   start [S1] [S2]: set up, train; stage 1 is stopped at S1 s (its best epoch so far is kept), stage 2 at S2 s;
#                    bring back the baseline, its logs and training records
#   pruned:          (the next call, machine still warm) bring back the pruned model
# Every call re-sends the working tree and drops what the last one wrote into it: models live in /tmp.
set -u
export PYTHONPATH=/tmp/site:$PWD SHOWDOWN_SHARED_DATA=/work/shared/data SHOWDOWN_ARTIFACTS=/tmp/artifacts PYTHONUNBUFFERED=1
COMMON="--answerable-first-epochs 0 --null-fraction 1.0 --answerability-weight 1.0 --batch-size 32 --negatives-share 0.3 --threads 4"
STAGE1="--full-data --epochs 2 --learning-rate 5e-5 $COMMON"
STAGE2="--answerability-stage --epochs 1 --learning-rate 3e-5 --removed-answer-share 0.5 $COMMON"

source experiments/gpu/gpu_qa_setup.sh  # setup

run_stage() {  # $1: stage name, $2: seconds to allow, $3: options; init from $4 (b) and $5 (p)
  for kind in b p; do
    init=$4; [ $kind = p ] && init=$5
    setsid nohup python3 -m optimize train-qa $3 --init-from $init --output /tmp/runs/$kind-$1 \
      > /tmp/runs/$kind-$1.log 2>&1 < /dev/null &
  done
  deadline=$((SECONDS + $2))
  while pgrep -f "optimize train-qa" > /dev/null && [ $SECONDS -lt $deadline ]; do sleep 5; done
  if pgrep -f "optimize train-qa" > /dev/null; then
    echo "$1: stopping at the deadline (SIGTERM: the best epoch so far stays saved)"
    pkill -TERM -f "optimize train-qa"
    while pgrep -f "optimize train-qa" > /dev/null; do sleep 2; done
  fi
  for kind in b p; do
    echo "== $kind-$1"; grep -E "train:|windows per epoch|validation|held-out|Error|error" /tmp/runs/$kind-$1.log | tail -n 6
    grep "windows/s" /tmp/runs/$kind-$1.log | tail -n 1
  done
}

case "$1" in
  start)
    setup
    run_stage s1 ${2:-330} "$STAGE1" /tmp/stage1/qa-minilm-squad2 /tmp/stage1/qa-minilm-squad2-pruned
    [ -f /tmp/runs/b-s1/model.safetensors ] && [ -f /tmp/runs/p-s1/model.safetensors ] || exit 1
    run_stage s2 ${3:-150} "$STAGE2" /tmp/runs/b-s1 /tmp/runs/p-s1
    (cd /tmp && tar czf $OUT/logs.tgz runs/*.log runs/*/training.json runs/*/qa_config.json 2>/dev/null)
    [ -f /tmp/runs/b-s2/training.json ] && tar cf - -C /tmp/runs b-s2 | split -b 15M -d - $OUT/b.tar.
    ls -la $OUT ;;
  pruned) tar cf - -C /tmp/runs p-s2 | split -b 15M -d - $OUT/p.tar.; ls -la $OUT ;;
esac
