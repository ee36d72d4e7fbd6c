"""Does the app report a model's time, or the model's time plus the server's? The same runner and
input, timed four ways in one process, interleaved in a shuffled order every round so that load
from other processes falls on all of them alike:

- `in-process`: `qa.answer` / `generation.generate` on this thread (how `python -m optimize bench`
  and `report` time);
- `fresh thread`: the same on a thread new to the model (a web worker thread the first time);
- `showdown`: `Showdown.answer` / `Showdown.generate` (the model thread and the one-model-at-a-time turn);
- `app /qa` or `app /generate`: the running app's own `latency_ms.total`, over its HTTP API.

QA: the bench's ~384-token context, or any (`--tokens 420 --tokens 550`: two windows); generation (`--task generation`): the bench's ~128-token
prompt and 64 new tokens, greedy.

Every call follows the same idle gap: a visitor's request arrives after idle time, and a loop of
back-to-back calls keeps thread pools spinning and caches warm (on a shared host the scheduler also
favours a thread that slept). Run it on a quiet machine; the load average is printed with the table.

    nice -n 15 python experiments/app-timing/measure_inflation.py --variant pruned --rounds 30
    python experiments/app-timing/measure_inflation.py --task generation --variant optimized --rounds 10
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import models  # noqa: F401,E402 - bounds thread spinning before torch loads
from models import generation, qa  # noqa: E402
from models.catalog import default_preset, preset  # noqa: E402
from models.showdown import Showdown  # noqa: E402


def _on_fresh_thread(call: Callable[[], float]) -> float:
    out: list[float] = []
    thread = threading.Thread(target=lambda: out.append(call()))
    thread.start()
    thread.join()
    return out[0]


def measure(showdown: Showdown, task: str, variant: str, tokens: int, rounds: int, gap_s: float,
            part: str = "total") -> dict[str, list[float]]:
    """Milliseconds per call, per way of calling; the app is served from this process."""
    import httpx

    from app import serve
    from optimize.bench.app_timing import free_port, http_api_call
    from optimize.bench.run import BenchConfig, generation_prompt
    from optimize.publish.report import QA_QUESTION, qa_context

    runner = showdown.runner(task, variant)
    if task == "qa":
        context = qa_context(runner.tokenizer, tokens)
        direct = lambda: qa.answer(runner, QA_QUESTION, context)["latency_ms"][part]  # noqa: E731
        served = lambda: showdown.answer(context, QA_QUESTION, variant)["latency_ms"][part]  # noqa: E731
        api = ("qa", [context, QA_QUESTION, variant, False])
    else:
        config = BenchConfig()
        prompt = generation_prompt(runner.tokenizer, config.generation_prompt_tokens)
        direct = lambda: generation.generate(runner, prompt, config.new_tokens)["latency_ms"][part]  # noqa: E731
        served = lambda: showdown.generate(prompt, variant, config.new_tokens)["latency_ms"][part]  # noqa: E731
        api = ("generate", [prompt, variant, config.new_tokens])
    port = free_port()
    from app import serving_settings
    showdown.serve_models_first(*serving_settings())  # as `python app.py` serves
    demo = serve(showdown, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/", timeout=120) as http:
            ways: dict[str, Callable[[], float]] = {
                "in-process": direct,
                "fresh thread": lambda: _on_fresh_thread(direct),
                "showdown": served,
                f"app /{api[0]}": lambda: http_api_call(http, *api)["latency_ms"][part],
            }
            for call in ways.values():  # warm-up
                call()
            times: dict[str, list[float]] = {name: [] for name in ways}
            shuffler = random.Random(0)
            for _ in range(rounds):
                for name in shuffler.sample(list(ways), len(ways)):
                    time.sleep(gap_s)
                    times[name].append(ways[name]())
            return times
    finally:
        demo.close()


def table(times: dict[str, list[float]], title: str) -> str:
    import numpy as np

    reference = float(np.median(times["in-process"]))
    lines = [f"**{title}** (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)", "",
             "| called | p50 (ms) | p25 (ms) | min (ms) | p50 / in-process |", "|---|---|---|---|---|"]
    for name, values in times.items():
        p25, p50 = np.percentile(values, [25, 50])
        lines.append(f"| {name} | {p50:.1f} | {p25:.1f} | {min(values):.1f} | {p50 / reference:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=("qa", "generation"), default="qa")
    parser.add_argument("--preset", help="default: the task's offline default")
    parser.add_argument("--variant", action="append", help="repeatable; default: pruned (committed weights)")
    parser.add_argument("--tokens", type=int, action="append", help="QA context tokens, repeatable (default 384)")
    parser.add_argument("--part", choices=("total", "model"), default="total",
                        help="which reported time: the whole call, or the model's forward(s) alone")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--gap-ms", type=float, default=50.0, help="idle time before every call")
    args = parser.parse_args()
    name = args.preset or default_preset(args.task).name
    other = "generation" if args.task == "qa" else "qa"  # the app's UI shows both tasks
    showdown = Showdown(presets={args.task: preset(name), other: default_preset(other)})
    for variant in args.variant or ["pruned"]:
        for tokens in (args.tokens or [384]) if args.task == "qa" else [0]:
            workload = f"~{tokens} tokens" if args.task == "qa" else "~128-token prompt, 64 new tokens"
            times = measure(showdown, args.task, variant, tokens, args.rounds, args.gap_ms / 1e3, args.part)
            print(table(times, f"{name}/{variant}, {workload}, {args.part} time, {args.rounds} rounds, "
                               f"{args.gap_ms:.0f} ms idle before each call"), "\n", flush=True)


if __name__ == "__main__":
    main()
