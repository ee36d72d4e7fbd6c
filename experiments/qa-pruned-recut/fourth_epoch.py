"""RULE-R6.md's R6: R3′ (R3's job finished from its committed compact checkpoint) given one more epoch of R3's own
recovery, on a schedule of its own that peaks at 3e-5. A resumable job: the same command continues after a stop
(SIGTERM or --stop-after); its log and checkpoint are under artifacts/train-jobs/qa-minilm-squad2-pruned-recut-r6/.
Validation only: the test articles are scored later, and only if RULE-R6.md says so.

    PYTHONPATH=. python experiments/qa-pruned-recut/fourth_epoch.py [--student R3_PRIME] [--stop-after STEPS]
    PYTHONPATH=. python experiments/qa-pruned-recut/fourth_epoch.py --save-compact   # commit it to go on elsewhere
"""
from __future__ import annotations

import argparse
import logging
import random
from pathlib import Path

import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models.catalog import REPO_ROOT, artifacts_root
from models.manifest import source_fingerprint
from optimize.evaluate import squad
from optimize.evaluate.accuracy import threshold_split
from optimize.prune.encoder import load_baseline, with_fused_attention
from optimize.train.finetune_qa import (TrainConfig, finish, resumable_job, save_compact, training_examples,
                                        training_features, validation_tracker)
from optimize.train.loop import epoch_features, fit, seed_everything
from optimize.train.recover_qa import EncoderRecoveryConfig, distil_loss_fn

TEACHER = REPO_ROOT / "weights" / "qa-minilm-squad2"  # B3, R3's teacher
# R3′: R3's command keeps it in <artifacts>/candidates/qa-minilm-squad2-pruned-r3.partial; committed here (the same files)
R3_PRIME = REPO_ROOT / "weights" / "train-jobs" / "qa-minilm-squad2-pruned-r3prime"
RECOVERY = EncoderRecoveryConfig(freeze_word_embeddings=True, attention_dropout=0.0)  # R3's student settings


def config() -> TrainConfig:
    """R3's TrainConfig (`optimize prune --task qa --full-data --epochs 3 --batch-size 32 --threads 2 --no-test`),
    one epoch at a peak of 3e-5."""
    return TrainConfig(output=artifacts_root() / "candidates" / "qa-minilm-squad2-pruned-recut-r6", epochs=1,
                       learning_rate=3e-5, answerable_first_epochs=0, threads=2, batch_size=32, score_test=False,
                       extra_data=(squad.TRAIN_HEAD_PATH, squad.SQUAD11_TRAIN_PATH), split=threshold_split(TEACHER))


def main(student_dir: Path, stop_after: int | None) -> dict:
    train_config = config()
    torch.set_num_threads(train_config.threads)
    seed_everything(train_config.seed)
    articles = squad.load_articles(train_config.data, train_config.split)
    tokenizer = AutoTokenizer.from_pretrained(TEACHER)
    features = training_features(tokenizer, training_examples(train_config, articles), train_config.qa)
    validation_data = squad.examples(articles, train_config.split.validation)
    teacher = with_fused_attention(load_baseline(TEACHER)).eval().to(train_config.device)
    student = with_fused_attention(AutoModelForQuestionAnswering.from_pretrained(student_dir, dtype=torch.float32),
                                   RECOVERY.attention_dropout)
    student.get_input_embeddings().requires_grad_(not RECOVERY.freeze_word_embeddings)
    history, best = [], {}
    state = {"history": history, "best": best}
    run_key = {"teacher": str(TEACHER), "teacher_sha256": source_fingerprint(TEACHER), "recovery": str(RECOVERY),
               "student_sha256": source_fingerprint(student_dir)}  # R3′'s weights, wherever the folder is
    with resumable_job(train_config.output) as checkpoint:
        logging.getLogger("optimize").info("R6: %s for one more epoch, %d windows; validation %d questions",
                                           student_dir, len(features), len(validation_data))
        scores = fit(student, features, tokenizer.pad_token_id, train_config,
                     validation_tracker(student, tokenizer, validation_data, train_config, history, best),
                     distil_loss_fn(teacher, RECOVERY), checkpoint=checkpoint, state=state, stop_after=stop_after,
                     run_key=run_key)
    if len(scores) < train_config.epochs:
        return {"stopped": True, "checkpoint": str(checkpoint)}
    trained = len(epoch_features(features, 1, train_config, random.Random(0)))
    extra = {"base_model": f"R3′ ({student_dir.name}, {source_fingerprint(student_dir)[:16]}) given a fourth epoch, "
                           f"distilled from {TEACHER.name} (T={RECOVERY.temperature}, alpha={RECOVERY.alpha}), RULE-R6.md",
             "train_windows": len(features), "train_seconds": state["train_seconds"],
             "windows_per_second": round(trained / max(state["train_seconds"], 1), 1), "threads": train_config.threads,
             "word_embeddings_frozen": RECOVERY.freeze_word_embeddings}
    return finish(train_config.output, tokenizer, train_config, best, history, articles, extra)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", type=Path, default=R3_PRIME, help="R3′'s kept model (default: its committed copy)")
    parser.add_argument("--stop-after", type=int, metavar="STEPS")
    parser.add_argument("--save-compact", action="store_true", help="the running job's last checkpoint, committable")
    args = parser.parse_args()
    if args.save_compact:
        print(f"compact checkpoint (commit it to continue in a fresh clone): {save_compact(config())}")
    else:
        result = main(args.student.resolve(), args.stop_after)
        print({k: v for k, v in result.items() if k in ("stopped", "checkpoint", "validation", "validation_score")})
