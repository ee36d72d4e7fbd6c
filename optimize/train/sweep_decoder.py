"""`python -m optimize sweep-generation`: accuracy and speed of decoder pruning, before recovery.

For each (dropped layers, kept FFN neurons per layer, share of all FFN neurons removed) setting,
ranked as the pruning stage ranks them (block influence, neuron activation x weight norm, on the
baseline's answers to training prompts): greedy next-token agreement with the baseline on the
baseline's answers to 64 training prompts kept out of the neuron ranking ("validation", where the
default is chosen) and on the held-out prompts (the gate's), perplexity ratio on the reading set's paragraphs, and
PyTorch fp32 greedy tokens/s (all configs in one process). This is the damage recovery has to
repair. (Pruned decoders are gated on perplexity and reading comprehension after recovery; the
default 6-layer cut and the recovered alternatives are in docs/gpu-runs.md.)
Writes reports/pruning-sweep-generation.{json,md}.
"""
from __future__ import annotations

import random
import statistics

import torch

from models.reports import save_rows

# (layers dropped, FFN neurons kept of 1,536 per layer, share of all FFN neurons removed globally)
GRID = ((0, 1536, 0.0), (1, 1536, 0.0), (2, 1536, 0.0), (4, 1536, 0.0), (8, 1536, 0.0),
        (0, 1408, 0.0), (0, 1280, 0.0), (0, 1152, 0.0), (0, 1024, 0.0), (0, 768, 0.0),
        (0, 1536, 0.01), (0, 1536, 0.02), (0, 1536, 0.03), (0, 1536, 0.05), (0, 1536, 0.10))
VALIDATION_CHATS = 64


def chat_agreement(model, chats: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    """Teacher-forced top-1 agreement with the reference's argmax over each whole chat."""
    matches = total = 0
    with torch.inference_mode():
        for chat, expected in zip(chats, reference):
            predicted = model(input_ids=chat, use_cache=False).logits[0].argmax(-1)
            matches, total = matches + int((predicted == expected).sum()), total + expected.numel()
    return 100 * matches / total


def run(grid: tuple[tuple[int, int, float], ...] = GRID) -> list[dict]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from models import generation
    from models.catalog import default_preset
    from models.sources import resolve
    from optimize.evaluate.accuracy import generation_accuracy
    from optimize.prune import decoder
    from optimize.train import recover_decoder as recover

    preset = default_preset("generation")
    baseline_dir = resolve(preset, preset.variant("baseline"))
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)

    def load():
        return AutoModelForCausalLM.from_pretrained(baseline_dir, dtype=torch.float32).eval()

    teacher = load()
    chats = recover.teacher_chat_set(teacher, tokenizer, baseline_dir)
    validation = chats[-VALIDATION_CHATS:]  # never used for ranking here (recovery, later, trains on every chat)
    with torch.inference_mode():
        validation_reference = [teacher(input_ids=chat, use_cache=False).logits[0].argmax(-1) for chat in validation]
    influence, neurons = decoder.importance(teacher, random.Random(42).sample(chats[:-VALIDATION_CHATS], 32))
    reference = recover.in_memory_runner(teacher, tokenizer, baseline_dir)
    rows = []
    for dropped_count, ffn_kept, share in grid:
        student = load()
        dropped, kept = decoder.plan(influence, neurons, decoder.DecoderPruneConfig(
            layers_dropped=dropped_count, ffn_kept=ffn_kept, ffn_pruned_share=share))
        decoder.prune_with_plan(student, dropped, kept)
        runner = recover.in_memory_runner(student, tokenizer, baseline_dir)
        metrics = generation_accuracy(runner, baseline_dir, lambda: reference)
        speed = statistics.median(generation.generate(runner, "Write a short story about a robot.", 32)["tokens_per_s"]
                                  for _ in range(3))
        rows.append({"layers_dropped": dropped_count, "dropped": dropped, "ffn_kept": ffn_kept, "ffn_pruned_share": share,
                     "ffn_neurons": sum(decoder.ffn_widths(kept)),
                     "parameters_m": round(sum(p.numel() for p in student.parameters()) / 1e6, 2),
                     "validation_agreement_pct": round(chat_agreement(student, validation, validation_reference), 2),
                     "agreement_pct": metrics["agreement_pct"],
                     "perplexity_ratio": metrics.get("perplexity_ratio"), "torch_fp32_tokens_per_s": round(speed, 1)})
        print(rows[-1], flush=True)
    save_rows("pruning-sweep-generation", "Generation pruning sweep, before recovery: layers dropped, FFN neurons kept per layer or removed globally (validation chats, held-out prompts and text)", rows)
    return rows
