"""`pruned-optimized` against `optimized` in one process, 11 interleaved rounds (the bench's 3 rounds read the
lookup-off ratio at 1.02-1.32x over four runs): the bench's chat prompt, 64 new tokens,
end-of-sequence ignored, each variant as the app loads it, `pruned-optimized` also with lookup off on the graph it
ships (the filled one: every attention pass two rows wide) and on its one-row graph (what `SHOWDOWN_PROMPT_LOOKUP=0`
loads).

    PYTHONPATH=. python experiments/int8-block-size/side_by_side.py [ROUNDS]
"""
from __future__ import annotations

import os
import statistics
import sys

from models.catalog import default_preset
from models.runners import load_runner
from optimize.bench.run import _decoded, decode_rate, generation_prompt


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    preset = default_preset("generation")
    runners = {name: load_runner("generation", name, "onnxruntime", preset.built_dir(name))
               for name in ("optimized", "pruned-optimized")}
    os.environ["SHOWDOWN_PROMPT_LOOKUP"] = "0"  # the one-row graph, no lookup
    runners["one-row"] = load_runner("generation", "pruned-optimized", "onnxruntime", preset.built_dir("pruned-optimized"))
    del os.environ["SHOWDOWN_PROMPT_LOOKUP"]
    prompt = generation_prompt(runners["optimized"].tokenizer, 128)
    contenders = {"optimized": ("optimized", False), "pruned-optimized, lookup off": ("pruned-optimized", False),
                  "pruned-optimized, one-row graph": ("one-row", False),
                  "pruned-optimized as shipped (lookup)": ("pruned-optimized", True)}
    rates = {name: [] for name in contenders}
    for name, (variant, lookup) in contenders.items():  # warm
        _decoded(runners[variant], prompt, 64, lookup)
    for round_ in range(rounds):
        names = list(contenders)
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            variant, lookup = contenders[name]
            rates[name].append(decode_rate(_decoded(runners[variant], prompt, 64, lookup)))
    print("| contender | decode tok/s (median) | vs optimized (median of per-round ratios) | per-round range |\n|---|---|---|---|")
    for name, values in rates.items():
        ratios = [v / o for v, o in zip(values, rates["optimized"])]
        print(f"| {name} | {statistics.median(values):.1f} | {statistics.median(ratios):.2f}x | {min(ratios):.2f}-{max(ratios):.2f} |")


if __name__ == "__main__":
    main()
