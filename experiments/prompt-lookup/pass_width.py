"""Issue 53: what a pass over w positions costs against a one-position decoding step, on a built ONNX
generation variant (the shared key/value buffer after a 250-token prompt; random token ids; 10 passes per
width per round, 5 rounds interleaved, median). Lookup pays only where the tokens a draft keeps outnumber
this cost.

    python experiments/prompt-lookup/pass_width.py [variant]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from models.catalog import default_preset
from models.runners import load_runner

WIDTHS = (1, 2, 3, 4, 6, 8)


def pass_prices(decoder, widths=WIDTHS, filled: bool = False) -> dict[int, float]:
    """Each width's pass in one-position passes (medians of 5 interleaved rounds of 10 passes); `filled`: on the
    filled graph (models/attention_filler.py), the one a variant that ships lookup decodes on."""
    step, _ = decoder._shared_steps(400, filled=filled)
    rng = np.random.default_rng(0)
    step(rng.integers(100, 40000, size=(1, 250)), 0)
    times: dict[int, list[float]] = {width: [] for width in widths}
    for _ in range(5):
        for width in widths:
            ids = rng.integers(100, 40000, size=(1, width))
            start = time.perf_counter()
            for _ in range(10):
                step(ids, 250, width)
            times[width].append((time.perf_counter() - start) / 10 * 1000)
    one = float(np.median(times[widths[0]]))
    return {width: round(float(np.median(measured)) / one, 3) for width, measured in times.items()}


def main(variant: str) -> None:
    runner = load_runner("generation", variant, "onnxruntime", default_preset("generation").built_dir(variant))
    prices = pass_prices(runner.model.decoder)
    print(f"{variant}: " + ", ".join(f"{width} positions {price:.2f}x" for width, price in prices.items()))

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "optimized")
