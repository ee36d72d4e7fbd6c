"""What several commands share: flags generated from a stage's config dataclass, and the data
options of the QA training commands."""
from __future__ import annotations

import argparse
from dataclasses import MISSING, fields


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


def config_flags(parser: argparse.ArgumentParser, config_class: type, helps: dict[str, str], prefix: str = "") -> None:
    """One `--field-name` per field of `config_class` named in `helps`, its type and default taken
    from the dataclass, so that a flag's default cannot drift from the stage's own."""
    for field in fields(config_class):
        if field.name in helps:
            default = None if field.default is MISSING else field.default
            parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(default) if default is not None else str,
                                default=default, help=f"{prefix}{helps[field.name]} (default {default})")


def config_from(args: argparse.Namespace, config_class: type, helps: dict[str, str]):
    """The dataclass from the flags `config_flags` added."""
    return config_class(**{name: getattr(args, name) for name in helps})
