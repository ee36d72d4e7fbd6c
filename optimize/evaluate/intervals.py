"""Error bars for gated deltas: a paired bootstrap over the items both sides were scored on.

Why paired: the variant and its reference answer the same questions, and most of a score's
sampling noise is which questions were drawn; resampling questions (not the two scores apart)
keeps that shared part out of the delta's interval. A gate reads the point estimate; the interval
tells a reader whether a difference is noise (issue 26)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

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


def grouped_ratio(reference: Mapping[str, float], candidate: Mapping[str, float], groups: Mapping[str, str],
                  samples: int = 10_000, seed: int = 0) -> dict:
    """Mean candidate score over mean reference score on the same items, with a 95 % percentile
    interval from resampling whole groups (a paragraph and all its questions): questions about one
    paragraph succeed or fail together, so resampling them one by one would make the interval too
    narrow. Returns the ratio and the difference in points, each with its interval."""
    items = sorted(set(reference) & set(candidate))
    if not items:
        raise ValueError("no item was scored on both sides")
    (ref_sum, cand_sum), count = _group_sums(items, groups, reference, candidate)
    names = range(len(count))
    draws = np.random.default_rng(seed).integers(0, len(names), (samples, len(names)))
    ref, cand, n = ref_sum[draws].sum(1), cand_sum[draws].sum(1), count[draws].sum(1)
    ratios = np.divide(cand, ref, out=np.ones_like(cand), where=ref > 0)
    deltas = 100 * (cand - ref) / n
    (ratio_low, ratio_high), (delta_low, delta_high) = np.percentile(ratios, [2.5, 97.5]), np.percentile(deltas, [2.5, 97.5])
    point = cand_sum.sum() / ref_sum.sum() if ref_sum.sum() else 1.0
    return {"ratio": round(float(point), 4), "ratio_ci95": [round(float(ratio_low), 4), round(float(ratio_high), 4)],
            "delta": round(float(100 * (cand_sum.sum() - ref_sum.sum()) / count.sum()), 2),
            "ci95": [round(float(delta_low), 2), round(float(delta_high), 2)], "items": len(items), "groups": len(names)}


def _group_sums(items: list[str], groups: Mapping[str, str], *scores: Mapping[str, float]):
    """Per group (sorted by name): each score's sum over the group's items, and the group's item count."""
    names = sorted({groups[i] for i in items})
    index = {name: k for k, name in enumerate(names)}
    of_item = np.array([index[groups[i]] for i in items])
    sums = [np.bincount(of_item, weights=[score[i] for i in items], minlength=len(names)) for score in scores]
    return sums, np.bincount(of_item, minlength=len(names)).astype(float)


def grouped_mean_interval(scores: Mapping[str, float], groups: Mapping[str, str], samples: int = 10_000,
                          seed: int = 0) -> list[float]:
    """A 95 % percentile interval of the mean score, in points, from resampling whole groups (a paragraph and
    all its questions), for the same reason as `grouped_ratio`: by question it would be too narrow."""
    (total,), count = _group_sums(sorted(scores), groups, scores)
    draws = np.random.default_rng(seed).integers(0, len(count), (samples, len(count)))
    low, high = np.percentile(100 * total[draws].sum(1) / count[draws].sum(1), [2.5, 97.5])
    return [round(float(low), 2), round(float(high), 2)]


def mean_interval(scores: Sequence[float], samples: int = SAMPLES, seed: int = 0, scale: float = 100.0) -> list[float]:
    """A 95 % percentile interval of the mean score, in points, from resampling the items."""
    values = scale * np.asarray(scores, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(values), (samples, len(values)))
    low, high = np.percentile(values[draws].mean(axis=1), [2.5, 97.5])
    return [round(float(low), 2), round(float(high), 2)]


def paired_ratio(reference: Sequence[tuple[float, int]], candidate: Sequence[tuple[float, int]],
                 samples: int = SAMPLES, seed: int = 0) -> dict:
    """Perplexity ratio candidate / reference over the same texts, each side given per text as
    (summed negative log-likelihood, tokens), with a 95 % interval from resampling the texts:
    exp((Σ nll_candidate − Σ nll_reference) / Σ tokens)."""
    if len(reference) != len(candidate) or not reference:
        raise ValueError("perplexity ratios need the same texts on both sides")
    nll_r, tokens = np.array([r[0] for r in reference]), np.array([r[1] for r in reference], dtype=float)
    nll_c = np.array([c[0] for c in candidate])
    draws = np.random.default_rng(seed).integers(0, len(reference), (samples, len(reference)))
    ratios = np.exp((nll_c[draws].sum(1) - nll_r[draws].sum(1)) / tokens[draws].sum(1))
    low, high = np.percentile(ratios, [2.5, 97.5])
    point = float(np.exp((nll_c.sum() - nll_r.sum()) / tokens.sum()))
    return {"ratio": round(point, 4), "ci95": [round(float(low), 4), round(float(high), 4)], "items": len(reference)}


def delta_text(delta: dict) -> str:
    """"−0.4 (95 % CI −0.9 to +0.1)": a point estimate and its interval in one phrase."""
    low, high = delta["ci95"]
    return f"{signed(delta['delta'])} (95% CI {signed(low)} to {signed(high)})"


def signed(value: float) -> str:
    return f"{value:+.1f}".replace("-", "−")


def ratio_text(ratio: dict) -> str:
    """"1.165x (95% CI 1.12x to 1.21x)"."""
    low, high = ratio["ci95"]
    return f"{ratio['ratio']:.3f}x (95% CI {low:.3f}x to {high:.3f}x)"
