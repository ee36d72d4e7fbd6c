"""`python -m optimize sweep-generation`: accuracy and speed of decoder layer dropping, before recovery.

For each number of dropped layers (ranked by block influence, as the pruning stage does): greedy
next-token agreement with the baseline on the held-out prompts, perplexity ratio on held-out
Wikipedia, and PyTorch fp32 greedy tokens/s (all configs in one process). This is the damage
recovery has to repair; it is why the default drops few layers. Writes reports/pruning-sweep-generation.{json,md}.
"""
from __future__ import annotations

import random
import statistics

import torch

from models.reports import save_rows

GRID = (0, 2, 4, 8, 12)


def run(grid: tuple[int, ...] = GRID) -> list[dict]:
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
    for dropped_count in grid:
        student = load()
        dropped, kept = pg.plan(influence, neurons, pg.DecoderPruneConfig(layers_dropped=dropped_count, ffn_kept=1536))
        pg.prune_with_plan(student, dropped, kept)
        runner = pg._runner(student, tokenizer, baseline_dir)
        metrics = generation_accuracy(runner, baseline_dir, lambda: reference)
        speed = statistics.median(generation.generate(runner, "Write a short story about a robot.", 32)["tokens_per_s"]
                                  for _ in range(3))
        rows.append({"layers_dropped": dropped_count, "dropped": dropped, "agreement_pct": metrics["agreement_pct"],
                     "perplexity_ratio": metrics.get("perplexity_ratio"), "torch_fp32_tokens_per_s": round(speed, 1)})
        print(rows[-1], flush=True)
    save_rows("pruning-sweep-generation", "Generation pruning sweep (held-out prompts and text, before recovery)", rows)
    return rows
