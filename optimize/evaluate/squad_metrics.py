"""Score any QA forward function on SQuAD examples through the serving pre/post-processing."""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models import answerability
from models.qa import QAConfig, postprocess, preprocess
from models.runners import torch_qa_logits
from optimize.evaluate import squad

Forward = Callable[[dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]


def evaluate(forward: Forward, tokenizer, data: list[squad.Example], config: QAConfig,
             threshold: float | None = None) -> dict:
    """Predict every example; tune the null threshold on `data` unless one is given."""
    spans, scores, _ = predict(forward, tokenizer, data, config)
    return scored(data, spans, scores, threshold)


def predict(forward: Forward, tokenizer, data: list[squad.Example], config: QAConfig,
            on_span: Callable[[squad.Example, str], None] | None = None
            ) -> tuple[dict[str, str], dict[str, float], dict[str, np.ndarray]]:
    """Each example's best span (even where "no answer" wins), the score its null decision is made
    on under `config` (the verifier's, else the margin: best span score minus null score), and the
    verifier's features, through the serving pre/post-processing. `on_span` sees each span as it
    comes (an agreement gate can stop a hopeless candidate early by raising)."""
    spans, scores, features = {}, {}, {}
    for example in data:
        windows = preprocess(tokenizer, example.question, example.context, config)
        start_logits, end_logits = forward(windows.inputs)
        answer = postprocess(windows, start_logits, end_logits, example.context, config)
        spans[example.id], scores[example.id], features[example.id] = answer.span, answer.answerability, answer.cues
        if on_span:
            on_span(example, answer.span)
    return spans, scores, features


def scored(data: list[squad.Example], spans: dict[str, str], scores: dict[str, float],
           threshold: float | None = None) -> dict:
    if threshold is None:
        threshold = squad.best_threshold(data, spans, scores)
    predictions = answered(spans, scores, threshold)
    return {
        "threshold": float(threshold),
        "metrics": squad.evaluate(data, predictions),
        "forced_metrics": squad.evaluate(data, spans),
        "predictions": predictions,
        "spans": spans,  # best span even where "no answer" won
        "scores": scores,  # what the null decision is made on: the verifier's score, else the margin
    }


def answered(spans: dict[str, str], scores: dict[str, float], threshold: float) -> dict[str, str]:
    """The served prediction per question: the best span where its answerability score is above
    `threshold`, else "" (no answer), as models/qa.py postprocess decides."""
    return {qid: spans[qid] if scores[qid] > threshold else "" for qid in spans}


def evaluate_model(model, tokenizer, data, config: QAConfig, threshold: float | None = None) -> dict:
    return evaluate(functools.partial(torch_qa_logits, model), tokenizer, data, config, threshold)


@dataclass(frozen=True)
class HeldOut:
    """What a QA variant is measured on: the test articles, the validation articles its null
    threshold is tuned on, and the hand-written everyday set. None of them is ever trained on."""

    test: list[squad.Example]
    validation: list[squad.Example]
    everyday: list[squad.Example]

    @classmethod
    def load(cls, data_path: Path = squad.DEFAULT_SQUAD_PATH, split: squad.ArticleSplit = squad.ArticleSplit()) -> HeldOut:
        articles = squad.load_articles(data_path)
        return cls(squad.examples(articles, split.test), squad.examples(articles, split.validation),
                   squad.everyday_examples())


def measure(forward: Forward, tokenizer, config: QAConfig, held_out: HeldOut,
            on_gated_span: Callable[[squad.Example, str], None] | None = None) -> dict:
    """Both ways, on held-out articles: SQuAD 2.0 EM/F1 (overall, HasAns, NoAns) with the
    answerability verifier and null threshold this variant fits on the validation articles, and
    SQuAD 1.1-style forced-span EM/F1 on the answerable questions; F1 both ways on the everyday set.
    `validation_f1` / `validation_forced_f1`: the same two on the validation articles, which the
    gates read (a test article decides nothing; the threshold fitted there flatters every variant alike).
    `margin_rule_f1` is SQuAD 2.0 F1 with the margin alone deciding (its threshold also tuned on
    validation), shown beside. `verifier` is for qa_config.json. `_validation_spans` (forced) are for the
    exact gate's span agreement with a source, `_spans` (test) for the same agreement shown, `_f1` /
    `_forced_f1` for intervals on a delta; none is stored. The validation articles are predicted first, so
    that `on_gated_span` (the agreement gate) can stop a hopeless export before the rest is spent."""
    predicted = {"validation": predict(forward, tokenizer, held_out.validation, config, on_gated_span)}
    for name in ("test", "everyday"):
        predicted[name] = predict(forward, tokenizer, getattr(held_out, name), config)
    validation = held_out.validation
    labels = np.array([bool(e.answers) for e in validation])
    margin = lambda values: float(values[0])  # noqa: E731 -- FEATURES[0]
    verifier = (answerability.fit(np.array([predicted["validation"][2][e.id] for e in validation]), labels)
                if 0 < labels.sum() < len(labels) else None)  # one class cannot fit it: the margin decides
    rule = verifier.score if verifier else margin

    def decided(name: str, rule) -> tuple[dict[str, str], dict[str, float]]:
        spans, _, features = predicted[name]
        return spans, {qid: rule(values) for qid, values in features.items()}

    threshold = squad.best_threshold(validation, *decided("validation", rule))
    checked = scored(validation, *decided("validation", rule), threshold)  # what gates read: never the test articles
    test = scored(held_out.test, *decided("test", rule), threshold)
    everyday = scored(held_out.everyday, *decided("everyday", rule), threshold)
    margin_test = scored(held_out.test, *decided("test", margin),
                         squad.best_threshold(validation, *decided("validation", margin)))
    rounded = {k: round(v, 2) for k, v in test["metrics"].items()}
    return {
        "split": "test articles " + ", ".join(sorted({e.article for e in held_out.test})),
        "null_threshold": round(threshold, 4), **rounded,
        "margin_rule_f1": round(margin_test["metrics"]["overall_f1"], 2),
        "answerability_auc": round(auc(held_out.test, test["scores"]), 3),
        "margin_auc": round(auc(held_out.test, margin_test["scores"]), 3),
        "verifier": verifier.to_dict() if verifier else None,
        "forced_exact": round(test["forced_metrics"]["HasAns_exact"], 2),
        "forced_f1": round(test["forced_metrics"]["HasAns_f1"], 2),
        "everyday_f1": round(everyday["metrics"]["overall_f1"], 2),
        "everyday_forced_f1": round(everyday["forced_metrics"]["HasAns_f1"], 2),
        "validation_split": "validation articles " + ", ".join(sorted({e.article for e in validation})),
        "validation_f1": round(checked["metrics"]["overall_f1"], 2),
        "validation_forced_f1": round(checked["forced_metrics"]["HasAns_f1"], 2),
        "_spans": {e.id: test["spans"][e.id] for e in held_out.test if e.answers},
        "_validation_spans": {e.id: checked["spans"][e.id] for e in validation if e.answers},
        # per question, for paired intervals on a delta against a source (not stored either)
        "_f1": {e.id: squad.score(e, test["predictions"][e.id])[1] for e in held_out.test},
        "_forced_f1": {e.id: squad.score(e, test["spans"][e.id])[1] for e in held_out.test if e.answers},
        "_validation_f1": {e.id: squad.score(e, checked["predictions"][e.id])[1] for e in validation},
        "_validation_forced_f1": {e.id: squad.score(e, checked["spans"][e.id])[1] for e in validation if e.answers},
    }


def auc(data: list[squad.Example], scores: dict[str, float]) -> float:
    """How well `scores` rank the answerable questions above the unanswerable ones (ROC AUC)."""
    return roc_auc([scores[e.id] for e in data if e.answers], [scores[e.id] for e in data if not e.answers])


def span_agreement(spans: dict[str, str], reference: dict[str, str]) -> float:
    """Share of answerable held-out questions on which two models pick the same forced span (the
    null decision is left out: a threshold flip at margin ≈ 0 is not a different model)."""
    return 100 * sum(spans[q] == reference[q] for q in reference) / max(len(reference), 1)


def roc_auc(positive: list[float], negative: list[float]) -> float:
    """Probability that a random positive scores above a random negative (ties count half)."""
    values = np.concatenate([np.asarray(positive, float), np.asarray(negative, float)])
    order = values.argsort(kind="mergesort")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):  # average ranks of ties
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    n_pos, n_neg = len(positive), len(negative)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
