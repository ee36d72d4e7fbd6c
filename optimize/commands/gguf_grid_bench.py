"""`python -m optimize gguf-grid-bench`: MatMulNBits forms of one Q4_1 GGUF weight against an fp32
MatMul (reports/gguf-grid-kernels.md)."""
from __future__ import annotations

import argparse
from dataclasses import replace

NAME = "gguf-grid-bench"
HELP = "MatMulNBits forms of a Q4_1 GGUF weight vs fp32 MatMul (reports/)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from optimize.commands.common import positive_int

    parser.add_argument("--rounds", type=positive_int, help="timed calls per variant (default 200)")


def run(args: argparse.Namespace) -> int:
    from optimize.bench.gguf_grid import GridBenchConfig
    from optimize.bench.gguf_grid import run as grid_bench

    grid_bench(replace(GridBenchConfig(), rounds=args.rounds) if args.rounds is not None else GridBenchConfig())
    return 0
