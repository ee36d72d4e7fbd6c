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


def main(variant: str) -> None:
    runner = load_runner("generation", variant, "onnxruntime", default_preset("generation").built_dir(variant))
    step, _ = runner.model.decoder._shared_steps(400)
    rng = np.random.default_rng(0)
    step(rng.integers(100, 40000, size=(1, 250)), 0)
    times: dict[int, list[float]] = {width: [] for width in WIDTHS}
    for _ in range(5):
        for width in WIDTHS:
            ids = rng.integers(100, 40000, size=(1, width))
            start = time.perf_counter()
            for _ in range(10):
                step(ids, 250, width)
            times[width].append((time.perf_counter() - start) / 10 * 1000)
    one = np.median(times[1])
    print(f"{variant}: " + ", ".join(f"{w} positions {np.median(t):.2f} ms ({np.median(t) / one:.2f}x)" for w, t in times.items()))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "optimized")
