"""`python -m optimize bench`: the project's variants against what users would pick instead (the
transformers pipeline, optimum's INT8, llama.cpp where installed) and the app's round trip, in one
run (reports/bench.*)."""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

NAME = "bench"
HELP = "project variants vs the transformers pipeline, optimum INT8 and llama.cpp (where installed), one run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=("qa", "generation"), action="append")
    parser.add_argument("--quick", action="store_true",
                        help="few rounds, 32 new tokens, no long document (the regression test's setting)")
    parser.add_argument("--no-app", action="store_true", help="skip the gradio_client round trip")
    parser.add_argument("--output", type=Path, help="folder for bench.json / bench.md (default reports/)")
    parser.add_argument("--render", action="store_true",
                        help="no timing: the ratios and table again from the stored bench.json's rows")
    parser.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)  # the app's: stop when it stops


def run(args: argparse.Namespace) -> int:
    from optimize.bench.run import BenchConfig, render
    from optimize.bench.run import run as bench_run
    from models.errors import InputError
    from optimize.commands.common import flags_given, writable_output

    writable_output(args.output)
    exit_on_sigterm()
    if args.parent_pid:
        stop_with_parent(args.parent_pid)
    if args.render and (timing := flags_given(args, add_arguments, ("task", "quick", "no_app"))):
        raise InputError(f"--render times nothing: {', '.join(timing)} would be ignored")  # they were, silently
    if args.render:
        render(**({"output": args.output} if args.output else {}))
        return 0

    # quick: ratios, not the report's figures (the regression test and the app's "Measure on this machine")
    config = (BenchConfig(qa_rounds=5, long_document_words=0, generation_rounds=2, app_rounds=5, outside_f1=False,
                          agreement_prompts=2, exact_rung=False, new_tokens=32)
              if args.quick else BenchConfig())
    if args.no_app:
        config = replace(config, app=False)
    bench_run(config, tuple(dict.fromkeys(args.task or ("qa", "generation"))), **({"output": args.output} if args.output else {}))
    return 0


def stop_with_parent(pid: int) -> None:
    """The app's "Measure on this machine" runs the bench as its child: when the app stops, the bench stops too (it had
    run on for minutes under PID 1, timing nothing anyone would see)."""
    import os
    import threading
    import time

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(1.0)  # a watchdog's poll: the parent's end has no event to wait on
        os._exit(1)

    threading.Thread(target=watch, name="stop-with-parent", daemon=True).start()


def exit_on_sigterm() -> None:
    """`kill PID` ends the bench as Ctrl-C does, through its `finally` blocks: the app server and llama.cpp workers it
    started are stopped with it (by default a SIGTERM ended the bench alone, and the app server ran on)."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
