#!/bin/bash
# The full-data QA job (issue 27) on a lent GPU (here first: experiments/gpu/device_trip.sh untrack), from the
# repo root there, with .gpu carried
# (wheels, the SQuAD folders and what the mode needs: see experiments/gpu/gpu_qa_full.py).
#   start:   finish the baseline from the compact checkpoint (.gpu/compact.pt.xz, .gpu/minilm-meta),
#            start the pruning candidates, bring the baseline back
#   prune:   prune the trained baseline (.gpu/baseline.tar.xz), wait, bring the candidates back
#   collect: (a later call on the still-warm machine) wait for the candidates, bring them back
# Every call re-sends the working tree and drops what the last one wrote into it: models live in /tmp.
set -u
export PYTHONPATH=/tmp/site:$PWD SHOWDOWN_SHARED_DATA=/work/shared/data PYTHONUNBUFFERED=1
IFS=, read -ra CANDIDATES <<< "${CANDIDATES:-6 768 1,4 512 0,8 768 2}"  # heads kept, FFN neurons kept, layers dropped
EPOCHS=${EPOCHS:-1}

setup() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
  # the device's tokenizers 0.23.2 (a patch release past transformers 4.57's pin): its wheel would not fit the trip
  sed -i 's/"tokenizers>=0.22.0,<=0.23.0"/"tokenizers>=0.22.0"/' /tmp/site/transformers/dependency_versions_table.py
  mkdir -p /work/shared/data
  python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('.gpu/squad.tar.xz')).extractall('/work/shared/data')"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
}

prune_candidates() {  # $1: the baseline folder (teacher and the model pruned)
  rm -rf /tmp/cands; mkdir -p /tmp/cands
  for candidate in "${CANDIDATES[@]}"; do
    set -- $1 $candidate
    name=qa-h$2-f$3-l$4-e$EPOCHS
    setsid nohup python3 -m optimize prune --task qa --baseline $1 --full-data --heads-kept $2 --ffn-kept $3 \
      --qa-layers-dropped $4 --epochs $EPOCHS --batch-size 32 --no-bf16 --threads 4 --freeze-word-embeddings \
      --output /tmp/cands/$name > /tmp/cands/$name.log 2>&1 < /dev/null &
  done
}

collect() {  # $1: seconds to wait before SIGTERM (the candidates then checkpoint); $2 "wait": return instead
  deadline=$((SECONDS + $1))
  while pgrep -f "optimize prune" > /dev/null && [ $SECONDS -lt $deadline ]; do sleep 10; done
  if [ "${2:-}" = wait ] && pgrep -f "optimize prune" > /dev/null; then
    tail -n 2 /tmp/cands/*.log; echo "still running: call collect"; return
  fi
  pkill -TERM -f "optimize prune"
  while pgrep -f "optimize prune" > /dev/null; do sleep 2; done
  for log in /tmp/cands/*.log; do echo "== $log"; grep -v "windows/s" $log | tail -n 8; grep "windows/s" $log | tail -n 1; done
  cp /tmp/cands/*.log $OUT/
  python3 experiments/gpu/gpu_qa_full.py pack pruned $OUT /tmp/cands/qa-*
  ls -la $OUT
}

if [ "$1" = start ]; then
  setup
  mkdir -p weights/train-jobs
  python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.gpu/compact.pt.xz'), open('weights/train-jobs/qa-minilm-squad2-full.pt', 'wb'))"
  python3 experiments/gpu/gpu_qa_full.py base weights/train-jobs/qa-minilm-squad2-full.pt .gpu/minilm-meta /tmp/site || exit 1
  python3 -m optimize train-qa --full-data --output weights/qa-minilm-squad2-full --epochs 1 --answerable-first-epochs 0 \
    --null-fraction 1.0 --answerability-weight 1.0 --batch-size 32 --no-bf16 --threads 8 > $OUT/train-qa.log 2>&1
  grep -v "windows/s" $OUT/train-qa.log | tail -n 30
  [ -f weights/qa-minilm-squad2-full/model.safetensors ] || exit 1
  mkdir -p /tmp/qa-base && cp -r weights/qa-minilm-squad2-full /tmp/qa-base/
  prune_candidates /tmp/qa-base/qa-minilm-squad2-full
  python3 experiments/gpu/gpu_qa_full.py pack baseline $OUT weights/qa-minilm-squad2-full
  ls -la $OUT
elif [ "$1" = prune ]; then
  setup
  mkdir -p /tmp/qa-base
  python3 -c "import lzma, tarfile; tarfile.open(fileobj=lzma.open('.gpu/baseline.tar.xz')).extractall('/tmp/qa-base')"
  prune_candidates /tmp/qa-base/qa-minilm-squad2-full
  collect ${2:-540} wait
elif [ "$1" = collect ]; then
  collect ${2:-540}
fi
