"""`python -m optimize instructions`: the public instruction set scored for every ready generation
variant (reports/instructions*)."""
from __future__ import annotations

import argparse

NAME = "instructions"
HELP = "the public instruction set, scored for every ready generation variant (reports/)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from optimize.evaluate.instructions import run as score

    score()
    return 0
