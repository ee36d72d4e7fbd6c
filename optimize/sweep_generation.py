"""`python -m optimize sweep-generation`: accuracy and speed of decoder pruning, before recovery.

For each (dropped layers, kept FFN neurons per layer) pair, ranked as the pruning stage ranks
them (block influence, neuron activation x weight norm): greedy next-token agreement with the
baseline on the held-out prompts, perplexity ratio on held-out Wikipedia, and PyTorch fp32
greedy tokens/s (all configs in one process). This is the damage recovery has to repair; the
default preset's pruning is the largest one whose agreement stays above the 85 % gate.
Writes reports/pruning-sweep-generation.{json,md}.
"""
from __future__ import annotations

import random
import statistics

import torch

from models.reports import save_rows

# (layers dropped, FFN neurons kept of 1,536): layers alone, then FFN alone
GRID = ((0, 1536), (1, 1536), (2, 1536), (4, 1536), (8, 1536),
        (0, 1408), (0, 1280), (0, 1152), (0, 1024), (0, 768))


def run(grid: tuple[tuple[int, int], ...] = GRID) -> list[dict]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from models import generation
    from models.catalog import default_preset
    from models.sources import resolve
    from optimize import prune_generation as pg
    from optimize.accuracy import generation_accuracy

    preset = default_preset("generation")
    baseline_dir = resolve(preset, preset.variant("baseline"))
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)

    def load():
        return AutoModelForCausalLM.from_pretrained(baseline_dir, dtype=torch.float32).eval()

    teacher = load()
    texts = pg.recovery_texts(tokenizer, 256)
    influence, neurons = pg.importance(teacher, random.Random(42).sample(texts, 32))
    reference = pg._runner(teacher, tokenizer, baseline_dir)
    rows = []
    for dropped_count, ffn_kept in grid:
        student = load()
        dropped, kept = pg.plan(influence, neurons, pg.DecoderPruneConfig(layers_dropped=dropped_count, ffn_kept=ffn_kept))
        pg.prune_with_plan(student, dropped, kept)
        runner = pg._runner(student, tokenizer, baseline_dir)
        metrics = generation_accuracy(runner, baseline_dir, lambda: reference)
        speed = statistics.median(generation.generate(runner, "Write a short story about a robot.", 32)["tokens_per_s"]
                                  for _ in range(3))
        rows.append({"layers_dropped": dropped_count, "dropped": dropped, "ffn_kept": ffn_kept,
                     "parameters_m": round(sum(p.numel() for p in student.parameters()) / 1e6, 1), "agreement_pct": metrics["agreement_pct"],
                     "perplexity_ratio": metrics.get("perplexity_ratio"), "torch_fp32_tokens_per_s": round(speed, 1)})
        print(rows[-1], flush=True)
    save_rows("pruning-sweep-generation", "Generation pruning sweep: layers dropped and FFN neurons kept (held-out prompts and text, before recovery)", rows)
    return rows
