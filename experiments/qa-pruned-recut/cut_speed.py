"""RULE-R7.md: the PyTorch fp32 speed of cuts of B3, side by side. The cuts are made by the build's own
`optimize.prune.encoder.prune` with uniform importance: a cut's speed does not depend on which heads it keeps.

    PYTHONPATH=. python experiments/qa-pruned-recut/cut_speed.py
"""
from __future__ import annotations

import copy
import statistics
import time

import torch
from transformers import AutoModelForQuestionAnswering

from optimize.prune.encoder import PruneConfig, prune

BASELINE = (12, 1536)  # B3: heads per layer, FFN neurons per layer
CUTS = [BASELINE, (4, 512), (5, 512), (6, 384), (5, 448), (6, 448), (4, 768), (6, 512), (6, 768), (8, 768)]
CALLS = 40


def cut(baseline, heads_kept: int, ffn_kept: int):
    layers = baseline.config.num_hidden_layers
    head_importance = torch.ones(layers, baseline.config.num_attention_heads)
    ffn_importance = torch.ones(layers, baseline.config.intermediate_size)
    return prune(copy.deepcopy(baseline), head_importance, ffn_importance, PruneConfig(heads_kept, ffn_kept)).eval()


def median_latency_ms(models: dict, tokens: int) -> dict:
    """Calls interleaved across the cuts, so each sees the same machine state."""
    input_ids = torch.randint(1000, 20000, (1, tokens))
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    latencies = {shape: [] for shape in models}
    with torch.inference_mode():
        for model in models.values():
            for _ in range(5):
                model(**inputs)
        for _ in range(CALLS):
            for shape, model in models.items():
                start = time.perf_counter()
                model(**inputs)
                latencies[shape].append((time.perf_counter() - start) * 1000)
    return {shape: statistics.median(values) for shape, values in latencies.items()}


if __name__ == "__main__":
    torch.set_num_threads(2)
    baseline = AutoModelForQuestionAnswering.from_pretrained("weights/qa-minilm-squad2", dtype=torch.float32).eval()
    models = {shape: baseline if shape == BASELINE else cut(baseline, *shape) for shape in CUTS}
    for tokens in (384, 160):
        latency_ms = median_latency_ms(models, tokens)
        print(tokens, {f"{heads}h/{ffn}": f"{latency_ms[(heads, ffn)]:.1f}ms {latency_ms[BASELINE] / latency_ms[(heads, ffn)]:.2f}x"
                       for heads, ffn in CUTS}, flush=True)
