"""`python -m optimize diagnose-qa`: spans against answerability, the margin's AUC and the F1 at the
best threshold (reports/qa-answerability*)."""
from __future__ import annotations

import argparse
from pathlib import Path

NAME = "diagnose-qa"
HELP = "spans vs answerability: margin AUC, best-threshold F1 (reports/)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--weights", type=Path, action="append", help="model folder (repeatable; default: both QA models)")


def run(args: argparse.Namespace) -> int:
    from models.sources import model_folder
    from optimize.evaluate.answerability import run as diagnose

    diagnose(*([tuple(model_folder(folder) for folder in args.weights)] if args.weights else []))
    return 0
