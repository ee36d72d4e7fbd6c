"""The commands of `python -m optimize`, one module each (named as the command), each with its
NAME, HELP, `add_arguments(parser)` and `run(args) -> exit status`, as optimum's CLI is built."""
from optimize.commands import (bench, bench_cuda, build, deploy_space, diagnose_qa, gguf_grid_bench, instructions, prune, push,
                               remeasure_qa, report, sweep_generation, sweep_qa, train_qa, verify)

COMMANDS = (train_qa, prune, sweep_qa, sweep_generation, remeasure_qa, diagnose_qa, build, verify, report, bench,
            bench_cuda, instructions, gguf_grid_bench, push, deploy_space)
