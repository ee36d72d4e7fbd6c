"""Issue 48: the shipped QA `pruned` distilled from the shipped baseline (B3) on B3's third-stage data
(RULE.md). A resumable job: the same command continues after a stop; its log is under
artifacts/train-jobs/qa-minilm-squad2-pruned-distilled/. Validation only: the test articles are scored
later, by `remeasure-qa`, and only if RULE.md says so.

    PYTHONPATH=. python experiments/qa-pruned-distil-b3/distil.py [--stop-after STEPS]
"""
from __future__ import annotations

import argparse
import logging
import random
from pathlib import Path

import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models.catalog import REPO_ROOT, artifacts_root
from optimize.evaluate import squad
from optimize.train.finetune_qa import (TrainConfig, finish, resumable_job, training_examples, training_features,
                                        validation_tracker)
from optimize.train.loop import epoch_features, fit, seed_everything
from optimize.train.recover_qa import EncoderRecoveryConfig, distil_loss_fn

TEACHER = REPO_ROOT / "weights" / "qa-minilm-squad2"
STUDENT = REPO_ROOT / "weights" / "qa-minilm-squad2-pruned"


def config(student: Path = STUDENT) -> TrainConfig:
    """B3's and P3's third stage (experiments/qa-more-negatives/RULE.md), written out."""
    return TrainConfig(output=artifacts_root() / "candidates" / "qa-minilm-squad2-pruned-distilled",
                       extra_data=(squad.TRAIN_HEAD_PATH, squad.MORE_DEV_PATH), split=squad.WIDE_VALIDATION,
                       epochs=1, learning_rate=3e-5, batch_size=32, answerable_first_epochs=0, null_fraction=1.0,
                       removed_answer_share=0.5, init_from=student, score_test=False)


def main(stop_after: int | None, train_config: TrainConfig | None = None, more_examples=lambda config: [],
         student_dir: Path = STUDENT, loss_fn_factory=distil_loss_fn, recipe: str = "") -> dict:
    """`train_config`, `more_examples` (training questions beyond the config's data), `student_dir` and
    `loss_fn_factory(teacher, recovery)` with its `recipe` (words for the model card): for later candidates
    (experiments/qa-pruned-spans, qa-pruned-recut, qa-pruned-layers); D1 ran with none of them."""
    train_config, recovery = train_config or config(student_dir), EncoderRecoveryConfig()
    torch.set_num_threads(train_config.threads)
    seed_everything(train_config.seed)
    articles = squad.load_articles(train_config.data)
    tokenizer = AutoTokenizer.from_pretrained(student_dir)
    train_data = training_examples(train_config, articles) + more_examples(train_config)
    features = training_features(tokenizer, train_data, train_config.qa)
    validation_data = squad.examples(articles, train_config.split.validation)
    teacher = AutoModelForQuestionAnswering.from_pretrained(TEACHER, dtype=torch.float32).eval()
    student = AutoModelForQuestionAnswering.from_pretrained(student_dir, dtype=torch.float32)
    history, best = [], {}
    state = {"history": history, "best": best}
    with resumable_job(train_config.output) as checkpoint:
        logging.getLogger("optimize").info("distil: %d questions -> %d windows; validation %d questions",
                                           len(train_data), len(features), len(validation_data))
        scores = fit(student, features, tokenizer.pad_token_id, train_config,
                     validation_tracker(student, tokenizer, validation_data, train_config, history, best),
                     loss_fn_factory(teacher, recovery), checkpoint=checkpoint, state=state, stop_after=stop_after,
                     run_key={"teacher": str(TEACHER), "student": str(student_dir), "recovery": str(recovery) + recipe})
    if len(scores) < train_config.epochs:
        return {"stopped": True, "checkpoint": str(checkpoint)}
    trained = len(epoch_features(features, 1, train_config, random.Random(0)))
    extra = {"base_model": f"{student_dir.name} distilled from {TEACHER.name} (T={recovery.temperature}, alpha={recovery.alpha}){recipe}",
             "train_questions": len(train_data), "train_windows": len(features),
             "train_seconds": state["train_seconds"], "windows_per_second": round(trained / max(state["train_seconds"], 1), 1),
             "threads": train_config.threads}
    return finish(train_config.output, tokenizer, train_config, best, history, articles, extra)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-after", type=int, metavar="STEPS")
    result = main(parser.parse_args().stop_after)
    print({k: v for k, v in result.items() if k in ("stopped", "checkpoint", "validation", "validation_score")})
