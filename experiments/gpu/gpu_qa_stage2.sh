#!/bin/bash
# The QA second-stage sweep (issue 27) on a lent GPU; first, here: experiments/gpu/device_trip.sh untrack 1,
# and carry .gpu (the wheels, .gpu/squad2.tar.xz with the two SQuAD 2.0 files, .gpu/stage1.tar.xz with
# the stage-1 baseline and the stage-1 pruned model without its word embeddings, which are the baseline's).
#   start [S]:  set up, train every candidate side by side, then `finish` within S seconds
#   finish [S]: wait for the candidates (at most S seconds), average the seed soups, choose by validation
#               (experiments/gpu/gpu_qa_stage2.py), bring back the chosen baseline
#   pruned:     (the next call, machine still warm) bring back the chosen pruned model
# Every call re-sends the working tree and drops what the last one wrote into it: models live in /tmp.
set -u
export PYTHONPATH=/tmp/site:$PWD SHOWDOWN_SHARED_DATA=/work/shared/data SHOWDOWN_ARTIFACTS=/tmp/artifacts PYTHONUNBUFFERED=1
STAGE2="--answerability-stage --answerable-first-epochs 0 --null-fraction 1.0 --answerability-weight 1.0 --batch-size 32 --no-bf16 --negatives-share 0.3 --threads 1"
# name, init (b: baseline, p: pruned), epochs, learning rate, seed, removed-answer share, swapped-name share
CANDIDATES=(
  "b-shipped b 1 3e-5 42 0.5 0"   "b-swap b 1 3e-5 42 0.5 0.5"   "b-swap-s1 b 1 3e-5 1 0.5 0.5"
  "b-swap-s2 b 1 3e-5 2 0.5 0.5"  "b-more b 1 3e-5 42 1.0 1.0"   "b-swap-2ep b 2 3e-5 42 0.5 0.5"
  "b-swap-lr5 b 1 5e-5 42 0.5 0.5"
  "p-shipped p 1 3e-5 42 0.5 0"   "p-swap p 1 3e-5 42 0.5 0.5"   "p-swap-s1 p 1 3e-5 1 0.5 0.5"
  "p-swap-s2 p 1 3e-5 2 0.5 0.5"  "p-swap-2ep p 2 3e-5 42 0.5 0.5"
)
# round 2 (`more`, the same warm machine): round 1 chose b-more, more on-topic negatives; its seeds, a second epoch
MORE=(
  "b-more-s1 b 1 3e-5 1 1.0 1.0"  "b-more-s2 b 1 3e-5 2 1.0 1.0"  "b-more-2ep b 2 3e-5 42 1.0 1.0"
  "p-more p 1 3e-5 42 1.0 1.0"    "p-more-s1 p 1 3e-5 1 1.0 1.0"  "p-more-s2 p 1 3e-5 2 1.0 1.0"
  "p-more-2ep p 2 3e-5 42 1.0 1.0"
)

source experiments/gpu/gpu_qa_setup.sh  # setup

launch() {
  for candidate in "$@"; do
    set -- $candidate  # (launch's own arguments are the candidates)
    init=/tmp/stage1/qa-minilm-squad2; [ $2 = p ] && init=/tmp/stage1/qa-minilm-squad2-pruned
    setsid nohup python3 -m optimize train-qa $STAGE2 --init-from $init --epochs $3 --learning-rate $4 --seed $5 \
      --removed-answer-share $6 --swapped-name-share $7 --output /tmp/runs/$1 > /tmp/runs/$1.log 2>&1 < /dev/null &
  done
}

finish() {  # $1: seconds to wait at most
  deadline=$((SECONDS + $1))
  while pgrep -f "optimize train-qa" > /dev/null && [ $SECONDS -lt $deadline ]; do sleep 5; done
  if pgrep -f "optimize train-qa" > /dev/null; then
    for log in /tmp/runs/*.log; do echo "$log: $(tail -c 300 $log | tr '\r' '\n' | tail -n 1)"; done
    echo "still running: call finish"; return
  fi
  for log in /tmp/runs/*.log; do echo "== $log"; grep -E "train:|validation|Error|error" $log | grep -v held-out | tail -n 4; done
  for kind in b p; do
    python3 experiments/gpu/gpu_qa_stage2.py soup /tmp/runs/$kind-soup /tmp/runs/$kind-swap /tmp/runs/$kind-swap-s1 /tmp/runs/$kind-swap-s2
    [ -d /tmp/runs/$kind-more-s1 ] && python3 experiments/gpu/gpu_qa_stage2.py soup /tmp/runs/$kind-more-soup /tmp/runs/$kind-more /tmp/runs/$kind-more-s1 /tmp/runs/$kind-more-s2
    python3 experiments/gpu/gpu_qa_stage2.py choose $kind /tmp/runs/$kind-*
  done
  # a call brings back a few files of at most ~16 MiB each: one archive of the logs, the chosen baseline in chunks
  (cd /tmp && tar czf $OUT/logs.tgz runs/*.log runs/*/training.json runs/*/soup.json 2>/dev/null)
  tar cf - -C /tmp chosen-b | split -b 15M -d - $OUT/b.tar.
  ls -la $OUT
}

case "$1" in
  start) setup; launch "${CANDIDATES[@]}"; sleep 30; tail -n 3 /tmp/runs/b-shipped.log; finish ${2:-480} ;;
  finish) finish ${2:-540} ;;
  more) [ -d /tmp/site/transformers ] || setup; rm -rf /tmp/chosen-*; launch "${MORE[@]}"; finish ${2:-300} ;;
  pruned) tar cf - -C /tmp chosen-p | split -b 15M -d - $OUT/p.tar.; ls -la $OUT ;;
esac
