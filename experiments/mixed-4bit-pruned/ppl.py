"""Perplexity of the shipped `pruned-optimized` and probe graphs on 48 selection paragraphs: squad-v2-dev articles
0-12 (not the QA test articles 13-15, not the reading set the build's gates read).

    PYTHONPATH=. python experiments/mixed-4bit-pruned/ppl.py /tmp/mixed/half /tmp/mixed/mlp /tmp/mixed/all
"""
import sys, math
from pathlib import Path
from models.catalog import default_preset
from models.runners import load_runner
from optimize.evaluate import squad
from optimize.evaluate.accuracy import text_nll

arts = squad.load_articles()
paras = [p["context"] for a in arts[:13] for p in a["paragraphs"]]
step = len(paras) / 48
texts = [paras[int(i * step)] for i in range(48)]
preset = default_preset("generation")
base = None
for p in ["shipped"] + sys.argv[1:]:
    path = preset.built_dir("pruned-optimized") if p == "shipped" else Path(p)
    r = load_runner("generation", "pruned-optimized", "onnxruntime", path)
    nll = text_nll(r, texts)
    ppl = math.exp(sum(n for n, _ in nll) / sum(c for _, c in nll))
    base = base or ppl
    print(p, f"{ppl:.3f}", f"{ppl / base:.4f}x", flush=True)
