"""`python -m optimize report`: every ready variant measured side by side (reports/qa.*, generation.*)."""
from __future__ import annotations

import argparse
from dataclasses import replace

NAME = "report"
HELP = "measure every ready variant side by side; write reports/"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=("qa", "generation"), action="append")
    from optimize.commands.common import positive_int

    parser.add_argument("--rounds", type=positive_int,
                        help="timed rounds per variant (default: QA 30 at ~384 tokens and 10 at each longer context, "
                             "generation 5); the untimed warm-up rounds stay")


def run(args: argparse.Namespace) -> int:
    from optimize.publish.report import ReportConfig
    from optimize.publish.report import run as report

    config = ReportConfig()
    if args.rounds is not None:
        config = replace(config, qa_rounds=args.rounds, qa_longer_rounds=args.rounds, generation_rounds=args.rounds)
    report(config, tuple(dict.fromkeys(args.task or ("qa", "generation"))))  # a task given twice is measured once
    return 0
