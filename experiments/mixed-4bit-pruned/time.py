"""Decode tokens/s of `optimized`, the shipped `pruned-optimized` and probe graphs (make_4bit.py), plain decoding
on one-row graphs (no lookup), the bench's chat prompt, 64 tokens, interleaved rounds.

    PYTHONPATH=. python experiments/mixed-4bit-pruned/time.py 9 /tmp/mixed/all
"""
import os, statistics, sys
from pathlib import Path
from models.catalog import default_preset
from models.runners import load_runner
from optimize.bench.run import _decoded, decode_rate, generation_prompt

rounds = int(sys.argv[1]); probes = sys.argv[2:]
preset = default_preset("generation")
os.environ["SHOWDOWN_PROMPT_LOOKUP"] = os.environ.get("GRAPH", "0")  # 0: one-row graph for all
runners = {n: load_runner("generation", n, "onnxruntime", preset.built_dir(n)) for n in ("optimized", "pruned-optimized")}
for p in probes:
    runners[p] = load_runner("generation", "pruned-optimized", "onnxruntime", Path(p))
prompt = generation_prompt(runners["optimized"].tokenizer, 128)
rates = {n: [] for n in runners}
texts = {}
for n, r in runners.items():
    texts[n] = _decoded(r, prompt, 64, False)["text"][:60]
for i in range(rounds):
    names = list(runners); names = names[i % len(names):] + names[:i % len(names)]
    for n in names:
        rates[n].append(decode_rate(_decoded(runners[n], prompt, 64, False)))
for n, v in rates.items():
    ratios = [a / b for a, b in zip(v, rates["optimized"])]
    print(f"{n}: {statistics.median(v):.1f} tok/s, vs optimized {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | {texts[n]!r}")
