"""Error bars for gated deltas: a paired bootstrap over the items both sides were scored on.

Why paired: the variant and its reference answer the same questions, and most of a score's
sampling noise is which questions were drawn; resampling questions (not the two scores apart)
keeps that shared part out of the delta's interval. A gate reads the point estimate; the interval
tells a reader whether a difference is noise (issue 26)."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

SAMPLES = 2000


def paired_delta(reference: Mapping[str, float], candidate: Mapping[str, float], samples: int = SAMPLES,
                 seed: int = 0, scale: float = 100.0) -> dict:
    """Mean of candidate − reference over the shared items, in points (`scale` × per-item scores in
    0..1), with a 95 % percentile interval from `samples` resamples of the items."""
    items = sorted(set(reference) & set(candidate))
    if not items:
        raise ValueError("no item was scored on both sides")
    differences = scale * (np.array([candidate[i] for i in items]) - np.array([reference[i] for i in items]))
    draws = np.random.default_rng(seed).integers(0, len(items), (samples, len(items)))
    means = differences[draws].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"delta": round(float(differences.mean()), 2), "ci95": [round(float(low), 2), round(float(high), 2)],
            "items": len(items)}


def delta_text(delta: dict) -> str:
    """"−0.4 (95 % CI −0.9 to +0.1)": a point estimate and its interval in one phrase."""
    low, high = delta["ci95"]
    return f"{_signed(delta['delta'])} (95% CI {_signed(low)} to {_signed(high)})"


def _signed(value: float) -> str:
    return f"{value:+.1f}".replace("-", "−")
