"""Should a QA variant answer? Its null margin, weighed with what the question asks about that the
context never mentions.

SQuAD 2.0's written unanswerable questions are mostly the paragraph's own sentence with one thing
changed, often a name swapped for a plausible one. A 6-layer encoder's null margin misses many of
them (AUC 0.66 on the test articles); "a name in the question that the context does not contain"
catches what it misses. `Verifier` is a logistic regression over the margin and these cues, fitted
per variant on the validation articles, as the null threshold is (optimize/evaluate/squad_metrics).
Without a fitted verifier the decision is the margin alone.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import asdict, dataclass

import numpy as np

FEATURES = ("margin", "null_score", "missing_words", "missing_names", "negation", "missing_numbers")

STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or is are was were be been being what which who whom "
    "whose when where why how did do does that this these those it its as than into about after before "
    "during under over between through not no".split())
_WORD = re.compile(r"[a-z0-9]+")
_NAME = re.compile(r"(?<!^)(?<![.?!] )\b[A-Z][\w'-]+(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w'-]+)*")
_NEGATION = re.compile(r"\b(not|never|no)\b|n't\b")
_NUMBER = re.compile(r"\b\d+\b", re.ASCII)  # the digits the context's words are indexed with
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})  # "didn’t" as phones and Macs type it


def _normal(text: str) -> str:
    """One form for the cues' string matching: a context with decomposed accents (NFD) had hidden the question's
    "Jerónimo" from them and flipped the decision, which the encoder itself does not see (its tokenizer normalises)."""
    return unicodedata.normalize("NFC", text).translate(_APOSTROPHES)


def question_names(question: str) -> list[str]:
    """Capitalised spans of a question, the first word excepted ("What", "When", ...)."""
    return [m.group(0) for m in _NAME.finditer(question.strip())]


@functools.lru_cache(maxsize=16)
def _context_index(context: str) -> tuple[str, frozenset[str]]:
    """A context lower-cased and its words, once per context: every question and variant about it
    reuses them (a long context takes milliseconds to index), as models/qa.py caches its tokens."""
    lowered = _normal(context).lower()
    return lowered, frozenset(_WORD.findall(lowered))


def features(question: str, context: str, margin: float, null_score: float) -> np.ndarray:
    """The verifier's inputs, in FEATURES order: the model's null margin and null score, the share
    of the question's content words absent from the context, how many of its names and numbers
    are absent, and whether it is negated. The question is stripped first, as serving strips it
    (SQuAD's own questions sometimes start with a space, and the first word is never a name)."""
    question = _normal(question.strip())
    lowered, context_words = _context_index(context)
    content = [w for w in _WORD.findall(question.lower()) if w not in STOPWORDS]
    missing_words = sum(w not in context_words for w in content) / max(len(content), 1)
    missing_names = sum(name.lower() not in lowered for name in question_names(question))
    missing_numbers = sum(n not in context_words for n in _NUMBER.findall(question))
    negation = float(bool(_NEGATION.search(question.lower())))
    return np.array([margin, null_score, missing_words, missing_names, negation, missing_numbers], dtype=np.float64)


@dataclass(frozen=True)
class Verifier:
    """Logistic regression on standardised FEATURES: score > the variant's null threshold answers."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    features: tuple[str, ...] = FEATURES

    def score(self, values: np.ndarray) -> float:
        standardised = (np.asarray(values, dtype=np.float64) - self.mean) / np.asarray(self.scale)
        return float(standardised @ np.asarray(self.weights) + self.bias)

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: dict) -> Verifier:
        if tuple(values.get("features", FEATURES)) != FEATURES:
            raise ValueError(f"verifier features {values.get('features')} are not this version's {FEATURES}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def fit(values: np.ndarray, answerable: np.ndarray, l2: float = 1.0) -> Verifier:
    """L2-penalised logistic regression by Newton's method (a few hundred to a few thousand rows,
    six features: no solver library needed)."""
    mean, scale = values.mean(axis=0), values.std(axis=0) + 1e-9
    design = np.hstack([(values - mean) / scale, np.ones((len(values), 1))])
    target = answerable.astype(np.float64)
    penalty = l2 * np.diag(np.r_[np.ones(design.shape[1] - 1), 0.0])  # the bias is not penalised
    weights = np.zeros(design.shape[1])
    for _ in range(50):
        probability = 1 / (1 + np.exp(-design @ weights))
        gradient = design.T @ (probability - target) + penalty @ weights
        hessian = (design * (probability * (1 - probability))[:, None]).T @ design + penalty
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-10:
            break
    return Verifier(tuple(map(float, mean)), tuple(map(float, scale)), tuple(map(float, weights[:-1])), float(weights[-1]))
