"""`python -m optimize sweep-generation`: what dropping decoder layers and FFN neurons costs before
recovery, and what it buys (reports/pruning-sweep-generation*)."""
from __future__ import annotations

import argparse

NAME = "sweep-generation"
HELP = "accuracy/speed of dropping decoder layers and FFN neurons (before recovery)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from optimize.train.sweep_decoder import run as sweep

    sweep()
    return 0
