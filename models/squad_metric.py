"""The official SQuAD 2.0 answer metric (normalisation as in evaluate-v2.0.py): exact match and
token F1 of a prediction against one gold answer; "" against "" is a correct "no answer"."""
from __future__ import annotations

import collections
import re
import string

_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact(gold: str, pred: str) -> float:
    return float(normalize_answer(gold) == normalize_answer(pred))


def f1(gold: str, pred: str) -> float:
    gold_tokens, pred_tokens = normalize_answer(gold).split(), normalize_answer(pred).split()
    if not gold_tokens or not pred_tokens:
        return float(gold_tokens == pred_tokens)
    common = collections.Counter(gold_tokens) & collections.Counter(pred_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def best_of(golds: list[str], prediction: str) -> tuple[float, float]:
    """EM and F1 against the closest of several gold answers; none (or only blanks) means unanswerable."""
    golds = [g for g in golds if normalize_answer(g)] or [""]
    return max(exact(g, prediction) for g in golds), max(f1(g, prediction) for g in golds)
