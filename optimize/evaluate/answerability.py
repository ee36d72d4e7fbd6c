"""`python -m optimize diagnose-qa`: where a QA model's held-out F1 is lost — spans or answerability.

SQuAD 2.0 F1 mixes two skills: finding the span (forced-span HasAns F1) and deciding whether to
answer at all (the answerability verifier's score, or the span-vs-null margin, against the tuned
threshold). This reports, per split, the ROC AUC of that score and of the margin alone as
answerable/unanswerable classifiers and the best F1 any threshold could
reach *on that split itself* (an upper bound, never used to pick the shipped threshold), beside the
everyday set's F1 (from the model's training.json) and one 384-token PyTorch fp32 forward, all models
timed in one process, so models trained at different times compare side by side. Writes
reports/qa-answerability.{json,md}.
"""
from __future__ import annotations

from pathlib import Path

from models.catalog import REPO_ROOT


def run(models: tuple[Path, ...] = (REPO_ROOT / "weights/qa-minilm-squad2", REPO_ROOT / "weights/qa-minilm-squad2-pruned")) -> list[dict]:
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from models.reports import save_rows
    from models.runners import load_qa_config
    from models.timing import forward_ms
    from optimize.evaluate import squad

    from optimize.evaluate.accuracy import split_of
    from optimize.evaluate.records import training_record

    articles = squad.load_articles()
    rows = []
    for weights in models:
        training = training_record(weights)
        split = split_of(training)  # the validation articles its threshold was tuned on
        model = AutoModelForQuestionAnswering.from_pretrained(weights, dtype=torch.float32).eval()
        tokenizer, config = AutoTokenizer.from_pretrained(weights), load_qa_config(weights)
        shown = {"everyday_f1": _everyday_f1(training), "torch_fp32_384_ms": round(forward_ms(model), 1)}
        for name, indices in (("validation", split.validation), ("test", split.test)):
            rows.append({**_diagnose(model, tokenizer, config, weights, name, squad.examples(articles, indices)), **shown})
            print(rows[-1], flush=True)
    save_rows("qa-answerability", "QA: spans vs answerability (shipped verifier and threshold; best-threshold F1 is "
                                  "an upper bound; the null margin's AUC beside the verifier's)", rows)
    return rows


def _everyday_f1(training: dict | None) -> float | None:
    """The everyday set's F1 as training recorded it; None for a model without a training record."""
    return training.get("held_out", {}).get("everyday_f1") if training is not None else None


def _diagnose(model, tokenizer, config, weights: Path, name: str, data) -> dict:
    import functools

    from models.runners import torch_qa_logits
    from optimize.evaluate import squad
    from optimize.evaluate.squad_metrics import answered, auc, predict, scored

    spans, scores, features = predict(functools.partial(torch_qa_logits, model), tokenizer, data, config)
    shipped = scored(data, spans, scores, config.null_threshold)
    best = squad.best_threshold(data, spans, scores)
    oracle = squad.evaluate(data, answered(spans, scores, best))
    return {
        "model": str(weights), "split": name, "questions": len(data),
        "overall_f1": round(shipped["metrics"]["overall_f1"], 2), "HasAns_f1": round(shipped["metrics"]["HasAns_f1"], 2),
        "NoAns_f1": round(shipped["metrics"]["NoAns_f1"], 2),
        "forced_span_HasAns_f1": round(shipped["forced_metrics"]["HasAns_f1"], 2),
        "answerability_auc": round(auc(data, scores), 3),
        "margin_auc": round(auc(data, {qid: values[0] for qid, values in features.items()}), 3),
        "best_threshold_f1_on_this_split": round(oracle["overall_f1"], 2),
        "no_answer_only_f1": round(100 * sum(not e.answers for e in data) / len(data), 2),
    }
