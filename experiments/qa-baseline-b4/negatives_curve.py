"""How the QA baseline's validation score grows with the number of real unanswerable questions in its last stage
(issue 48: how far the 13 more dev articles are from what the bar of 66 needs). B3's stage from B3's own start, seed 42,
one epoch, with none (H0), the first 7 (H7: 1,010 unanswerable of 2,064) or all 13 of the more-negatives articles (B3).
Analysis only: no candidate, validation only, no test look (CURVE.md).

    python experiments/qa-baseline-b4/negatives_curve.py h0|h7
"""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from models.catalog import REPO_ROOT
from optimize.evaluate import squad
from optimize.train.finetune_qa import TrainConfig, train

START = REPO_ROOT / "artifacts/candidates/pre-b3"  # the baseline before B3 (commit 254941f), as RULE.md's B5 used


def first_articles(count: int) -> Path:
    """The first `count` articles of the more-negatives file, written under artifacts/ (the data stays out of git)."""
    data = json.loads(squad.MORE_DEV_PATH.read_text())
    subset = REPO_ROOT / f"artifacts/candidates/dev-v2.0-more-first{count}.json"
    subset.write_text(json.dumps({"version": data["version"], "data": data["data"][:count]}))
    return subset


def main(arm: str) -> None:
    extra = {"h0": (squad.TRAIN_HEAD_PATH,), "h7": (squad.TRAIN_HEAD_PATH, first_articles(7))}[arm]
    config = TrainConfig(output=REPO_ROOT / f"artifacts/candidates/qa-{arm}", extra_data=extra, split=squad.WIDE_VALIDATION,
                         init_from=START, epochs=1, learning_rate=3e-5, batch_size=32, answerable_first_epochs=0,
                         null_fraction=1.0, answerability_weight=1.0, removed_answer_share=0.5, score_test=False)
    result = train(config)
    print(json.dumps({k: result.get(k) for k in ("validation", "validation_score", "history", "train_windows")}))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")  # the loop's progress lines
    main(sys.argv[1])
