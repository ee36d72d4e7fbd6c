"""Timing helpers shared by the runtime and the offline build (report, bench, the build's graph
choice). A leaf module: it imports nothing from the project, so neither side imports the other."""
from __future__ import annotations

import random
import time
from collections.abc import Callable

import numpy as np


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def timed_rounds(contenders: dict[str, Callable[[], object]], rounds: int, warmup: int,
                 on_round: Callable[[int], None] | None = None) -> dict[str, list]:
    """Warm up each, then `rounds` rounds, each in a fresh seeded shuffle of the order; (seconds,
    output) per call. Why shuffle: on 2 cores a call is slower right after a PyTorch model (its
    OpenMP threads and its weights in the cache), and a rotation keeps every contender behind the
    same neighbour — it held QA pruned-optimized behind PyTorch `pruned` in every round, and slower
    for it (docs/measurements.md)."""
    for call in contenders.values():
        for _ in range(warmup):
            call()
    names = list(contenders)
    out: dict[str, list] = {name: [] for name in names}
    shuffler = random.Random(0)
    for round_index in range(rounds):
        for name in shuffler.sample(names, len(names)):
            started = time.perf_counter()
            value = contenders[name]()
            out[name].append((time.perf_counter() - started, value))
        if on_round:
            on_round(round_index)
    return out


def forward_ms(model, repeats: int = 15) -> float:
    """Median milliseconds of one 384-token PyTorch forward of a QA encoder, after three untimed ones:
    the sweeps and diagnose-qa show it beside each model they measure, timed in one process."""
    import statistics

    import torch

    inputs = {"input_ids": torch.randint(1000, 2000, (1, 384)), "attention_mask": torch.ones(1, 384, dtype=torch.long)}
    times = []
    with torch.inference_mode():
        for index in range(repeats + 3):
            started = time.perf_counter()
            model(**inputs)
            if index >= 3:
                times.append(1e3 * (time.perf_counter() - started))
    return statistics.median(times)


def median_call(calls: list[dict], how: str) -> dict:
    """The call whose total time is the median of `calls` (the answer shown with it), the range of all,
    and `how` they were taken: one call after idle time wanders, a median of a few does not."""
    ordered = sorted(calls, key=lambda call: call["latency_ms"]["total"])
    low, high = ordered[0]["latency_ms"]["total"], ordered[-1]["latency_ms"]["total"]
    return {**ordered[len(ordered) // 2], "latency_range_ms": [low, high],
            "timing": f"as the median of {len(ordered)} calls ({low:.1f}-{high:.1f} ms), {how}"}


def with_speedups(results: dict[str, dict]) -> dict[str, dict]:
    """Each timed result's `speedup`: the baseline's total time over its own, when the baseline ran."""
    baseline = results.get("baseline", {}).get("latency_ms", {}).get("total")
    for result in results.values():
        if baseline and "latency_ms" in result:
            result["speedup"] = baseline / result["latency_ms"]["total"]
    return results
