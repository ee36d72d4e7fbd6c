"""`python -m optimize remeasure-qa`: saved QA weights measured again on the held-out articles; their
answerability verifier and null threshold refitted on validation, their model card rewritten. Each
call is a look at the test articles: run it only for a model its validation rule has chosen."""
from __future__ import annotations

import argparse
from pathlib import Path

from models.catalog import REPO_ROOT

NAME = "remeasure-qa"
HELP = ("measure saved QA weights again on the held-out articles; refit their answerability verifier and null "
        "threshold on validation")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--weights", type=Path, action="append", help="model folder (repeatable; default: both QA models)")
    parser.add_argument("--why", default="remeasure-qa",
                        help="recorded with this look at the test articles in training.json and the model card")


def run(args: argparse.Namespace) -> int:
    from models.sources import model_folder
    from optimize.train.finetune_qa import remeasure_saved

    for weights in [model_folder(folder) for folder in args.weights or ()] or (
            REPO_ROOT / "weights/qa-minilm-squad2", REPO_ROOT / "weights/qa-minilm-squad2-pruned"):
        remeasure_saved(weights, args.why)
    return 0
