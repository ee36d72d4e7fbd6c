"""Score any QA forward function on SQuAD examples through the serving pre/post-processing."""
from __future__ import annotations

from collections.abc import Callable

import functools

import numpy as np

from models.qa import QAConfig, postprocess, preprocess
from models.runners import torch_qa_logits
from optimize import squad

Forward = Callable[[dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]


def evaluate(forward: Forward, tokenizer, data: list[squad.Example], config: QAConfig,
             threshold: float | None = None) -> dict:
    """Predict every example; tune the null threshold on `data` unless one is given."""
    spans, margins = {}, {}
    for example in data:
        windows = preprocess(tokenizer, example.question, example.context, config)
        start_logits, end_logits = forward(windows.inputs)
        answer = postprocess(windows, start_logits, end_logits, example.context, config)
        spans[example.id], margins[example.id] = answer.span, answer.score
    if threshold is None:
        threshold = squad.best_threshold(data, spans, margins)
    predictions = answered(spans, margins, threshold)
    return {
        "threshold": float(threshold),
        "metrics": squad.evaluate(data, predictions),
        "forced_metrics": squad.evaluate(data, spans),
        "predictions": predictions,
        "spans": spans,  # best span even where "no answer" won
        "margins": margins,  # best span score minus null score
    }


def answered(spans: dict[str, str], margins: dict[str, float], threshold: float) -> dict[str, str]:
    """The served prediction per question: the best span where it beats the null score by more
    than `threshold`, else "" (no answer), as models/qa.py postprocess decides."""
    return {qid: spans[qid] if margins[qid] > threshold else "" for qid in spans}


def evaluate_model(model, tokenizer, data, config: QAConfig, threshold: float | None = None) -> dict:
    return evaluate(functools.partial(torch_qa_logits, model), tokenizer, data, config, threshold)
