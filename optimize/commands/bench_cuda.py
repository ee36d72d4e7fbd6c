"""`python -m optimize bench-cuda`: every variant on the GPU beside PyTorch fp32 eager on the same GPU, and
each against its CPU source (reports/qa-cuda.*, reports/generation-cuda.*). Needs a CUDA machine."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

NAME = "bench-cuda"
HELP = "the variants on a GPU (FP16, IO binding) vs PyTorch fp32 eager there"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=("qa", "generation"), action="append")
    parser.add_argument("--quick", action="store_true", help="few rounds and questions (a rehearsal)")
    parser.add_argument("--output", type=Path, help="folder for the reports (default reports/)")


def run(args: argparse.Namespace) -> int:
    import torch

    from optimize.bench.cuda import CudaBenchConfig, run_task
    from optimize.commands.common import writable_output

    if not torch.cuda.is_available():
        print("error: bench-cuda needs a CUDA GPU (torch.cuda.is_available() is False here)", file=sys.stderr)
        return 2
    config = CudaBenchConfig()
    if args.quick:
        config = replace(config, qa_rounds=10, warmup=2, qa_questions=20, generation_rounds=2, agreement_prompts=2)
    if args.output:
        config = replace(config, out=writable_output(args.output))
    for task in dict.fromkeys(args.task or ("qa", "generation")):
        run_task(task, config)
        print(f"wrote {config.out / f'{task}-cuda.md'}")
    return 0
