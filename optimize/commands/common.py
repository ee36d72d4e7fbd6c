"""What several commands share: the data options of the QA training commands."""
from __future__ import annotations

import argparse


def data_options(config, args: argparse.Namespace) -> None:
    """--no-bf16, --full-data, --answerability-stage and --data (where the command has them):
    train-qa, prune and sweep-qa."""
    from optimize.evaluate import squad

    if getattr(args, "no_bf16", False):
        config.bf16 = False
    if getattr(args, "full_data", False):
        config.extra_data, config.split = (squad.TRAIN_HEAD_PATH, squad.SQUAD11_TRAIN_PATH), squad.WIDE_VALIDATION
    if getattr(args, "answerability_stage", False):
        config.extra_data, config.split = (squad.TRAIN_HEAD_PATH,), squad.WIDE_VALIDATION
    if getattr(args, "data", None):
        config.data = args.data
