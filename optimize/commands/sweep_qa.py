"""`python -m optimize sweep-qa`: accuracy and latency of QA pruning sparsities before recovery, or
recovered candidates tabulated beside the baseline (reports/pruning-sweep-qa*)."""
from __future__ import annotations

import argparse
from pathlib import Path

from models.catalog import REPO_ROOT
from optimize.commands.common import data_options

NAME = "sweep-qa"
HELP = "accuracy/latency of QA pruning sparsities (before recovery)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", type=Path, default=REPO_ROOT / "weights/qa-minilm-squad2", help="the model pruned")
    parser.add_argument("--full-data", action="store_true", help="validate on the 4 validation articles of train-qa --full-data")
    parser.add_argument("--recovered", type=Path, nargs="+",
                        help="instead: tabulate these pruned-and-recovered candidate folders beside the baseline")


def run(args: argparse.Namespace) -> int:
    from models.errors import InputError
    from models.sources import model_folder
    from optimize.evaluate import squad
    from optimize.evaluate.accuracy import threshold_split
    from optimize.train import sweep_encoder
    from optimize.train.finetune_qa import TrainConfig

    model_folder(args.baseline)  # a wrong path had been taken for a Hub id, in a traceback
    config = TrainConfig()
    data_options(config, args)
    if squad.is_dev_file(config.data):  # heads and neurons ranked on the baseline's training articles only
        config.split = threshold_split(args.baseline)
    if args.recovered:  # every folder checked before the baseline's minutes of measuring
        for folder in args.recovered:
            if not (model_folder(folder) / "training.json").is_file():
                raise InputError(f"--recovered {folder}: no training.json there (a folder `prune --task qa` wrote)")
        sweep_encoder.recovered(args.recovered, args.baseline)
    else:
        sweep_encoder.run(args.baseline, config)
    return 0
