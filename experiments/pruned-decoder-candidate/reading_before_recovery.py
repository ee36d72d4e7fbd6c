"""Which cut of a fifth of SmolLM2's block parameters keeps reading comprehension best before any
recovery (issue 28)? The committed 20 % candidate (6 layers dropped, LoRA-distilled) keeps 56 % of
the baseline's reading F1 on the test articles; distillation time on a lent GPU is scarce, so this
picks what to distil next by the **validation** article's questions, never the test articles'.

For each cut (the pruning stage's own ranking: block influence and FFN neuron importance on the
baseline's answers to training prompts): reading F1 on the validation article's answerable
questions (the build's prompt and greedy decoding) with its paired 95 % interval against the
baseline, perplexity on the validation article's paragraphs, and the share of block parameters
removed. The committed candidate after its recovery is measured beside them.

    python experiments/pruned-decoder-candidate/reading_before_recovery.py [--questions N]

Writes experiments/pruned-decoder-candidate/reading-before-recovery.md.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scripts.gpu_distill_generation import block_parameters  # noqa: E402  (the GPU runs' count, the same here)

HERE = Path(__file__).parent
CUTS = (  # (layers dropped, FFN neurons kept per layer, share of all FFN neurons removed globally)
    (6, 1536, 0.0), (4, 1344, 0.0), (2, 1216, 0.0), (0, 1536, 0.27))
CANDIDATE = Path("weights/generation-smollm2-pruned-20pct")


def main(limit: int | None) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from models.catalog import default_preset
    from models.sources import resolve
    from optimize.evaluate import accuracy, reading, squad
    from optimize.evaluate.intervals import mean_interval
    from optimize.prune import decoder
    from optimize.train import recover_decoder as recover

    preset = default_preset("generation")
    baseline_dir = resolve(preset, preset.variant("baseline"))
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)

    def load():
        return AutoModelForCausalLM.from_pretrained(baseline_dir, dtype=torch.float32).eval()

    validation = [e for e in squad.examples(squad.load_articles(), squad.ArticleSplit().validation) if e.answers][:limit]
    paragraphs = list(dict.fromkeys(e.context for e in validation))
    teacher = load()
    full_blocks = block_parameters(teacher)
    chats = recover.teacher_chat_set(teacher, tokenizer, baseline_dir)
    influence, neurons = decoder.importance(teacher, random.Random(42).sample(chats, 32))

    def measured(name: str, model) -> dict:
        started = time.perf_counter()
        runner = recover.in_memory_runner(model, tokenizer, baseline_dir)
        scores = reading.measure(runner, validation)
        row = {"cut": name, "block_params_removed_pct": round(100 * (1 - block_parameters(model) / full_blocks), 1),
               "reading_f1": scores["reading_f1"], "ci95": mean_interval(list(scores["per_question"].values())),
               "per_question": scores["per_question"], "perplexity": round(accuracy.perplexity(runner, paragraphs), 2),
               "seconds": round(time.perf_counter() - started)}
        print({k: v for k, v in row.items() if k != "per_question"}, flush=True)
        return row

    rows = [measured("baseline", teacher)]
    for dropped_count, ffn_kept, share in CUTS:
        student = load()
        dropped, kept = decoder.plan(influence, neurons, decoder.DecoderPruneConfig(
            layers_dropped=dropped_count, ffn_kept=ffn_kept, ffn_pruned_share=share))
        decoder.prune_with_plan(student, dropped, kept)
        name = (f"{dropped_count} layers dropped {sorted(dropped)}" if dropped_count else "no layer dropped") + (
            f", {share:.0%} of FFN neurons removed globally" if share else
            f", {ffn_kept} FFN neurons kept per layer" if ffn_kept < 1536 else "")
        rows.append(measured(name + " (no recovery)", student))
    if CANDIDATE.exists():
        student = load()
        dropped, kept, delta = decoder.load_recovery(CANDIDATE)
        decoder.prune_with_plan(student, dropped, kept)
        decoder.apply_delta(student, delta)
        rows.append(measured(f"committed candidate: layers {sorted(dropped)} dropped, LoRA-distilled", student))
    write(rows, len(validation))


def write(rows: list[dict], questions: int) -> None:
    from optimize.evaluate.intervals import paired_delta

    baseline = rows[0]
    lines = [f"# Reading comprehension of 20 % cuts of SmolLM2 before recovery (validation article, {questions} "
             "answerable questions)", "",
             "`python experiments/pruned-decoder-candidate/reading_before_recovery.py`; reading F1 with its 95 % "
             "interval, the paired difference to the baseline, perplexity on the validation paragraphs.", "",
             "| cut | block parameters removed | reading F1 (95 % CI) | vs baseline (paired 95 % CI) | % of baseline | perplexity |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        delta = paired_delta(baseline["per_question"], row["per_question"]) if row is not baseline else None
        versus = f"{delta['delta']:+.2f} ({delta['ci95'][0]:+.2f}..{delta['ci95'][1]:+.2f})" if delta else "—"
        share = 100 * row["reading_f1"] / baseline["reading_f1"] if baseline["reading_f1"] else float("nan")
        lines.append(f"| {row['cut']} | {row['block_params_removed_pct']} % | {row['reading_f1']} "
                     f"({row['ci95'][0]}-{row['ci95'][1]}) | {versus} | {share:.0f} % | {row['perplexity']} |")
    (HERE / "reading-before-recovery.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, help="the first N answerable validation questions (default all)")
    main(parser.parse_args().questions)
