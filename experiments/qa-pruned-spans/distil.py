"""Issue 48 / the `pruned` promise: D1's distillation (experiments/qa-pruned-distil-b3) with a fixed sample of
SQuAD 1.1 training questions added for spans (RULE.md). Resumable: the same command continues after a stop;
its log is under artifacts/train-jobs/. Validation only.

    PYTHONPATH=. python experiments/qa-pruned-spans/distil.py [--stop-after STEPS]
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import logging
import random

from models.catalog import REPO_ROOT, artifacts_root
from optimize.evaluate import squad

SPAN_QUESTIONS = 20_000
SEED = 48


def _d1():
    path = REPO_ROOT / "experiments" / "qa-pruned-distil-b3" / "distil.py"
    spec = importlib.util.spec_from_file_location("d1_distil", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def span_sample(config) -> list[squad.Example]:
    """20,000 answerable SQuAD 1.1 training questions drawn with seed 48, none from its first 10 articles
    (those are the SQuAD 2.0 train head's, already in the third-stage data)."""
    articles = squad.load_articles(squad.SQUAD11_TRAIN_PATH)
    pool = squad.examples(articles, tuple(range(10, len(articles))))
    return random.Random(SEED).sample(pool, SPAN_QUESTIONS)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-after", type=int, metavar="STEPS")
    d1 = _d1()
    train_config = dataclasses.replace(d1.config(), output=artifacts_root() / "candidates" / "qa-minilm-squad2-pruned-spans")
    result = d1.main(parser.parse_args().stop_after, train_config, span_sample)
    print({k: v for k, v in result.items() if k in ("stopped", "checkpoint", "validation", "validation_score")})
