"""`python -m optimize verify`: every gate of every built variant measured again here, no record
read (optimize/verify.py)."""
from __future__ import annotations

import argparse

NAME = "verify"
HELP = ("measure every gate of every built variant again here, no record read; say where the records disagree "
        "(reports/verify-*); the preset the app serves (SHOWDOWN_QA_PRESET / SHOWDOWN_GENERATION_PRESET)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=("qa", "generation"), action="append")
    parser.add_argument("--variant", action="append", default=[],
                        help="only this variant (repeat for several); its report is written apart")


def run(args: argparse.Namespace) -> int:
    from optimize.verify import run as verify

    tasks = list(dict.fromkeys(args.task or ["qa", "generation"]))  # a task or variant given twice: measured once
    return verify(tasks, variants=tuple(dict.fromkeys(args.variant)))
