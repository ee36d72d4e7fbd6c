"""Free vs sign-constrained verifier (absence cues may only lower answerability), per model, from collect.py's
dump: validation (in-sample threshold, and leave-one-article-out), test, everyday, the showcase. Usage:
PYTHONPATH=. python experiments/qa-answerability-verifier/monotone/analyze.py DUMP.pkl"""
import pickle
import sys

import numpy as np

from models import answerability
from models.answerability import FEATURES, Verifier

NON_POSITIVE = ("missing_words", "missing_names", "missing_numbers")


def fit(values, answerable, non_positive=NON_POSITIVE, l2=1.0):
    """models.answerability.fit, except that a feature in `non_positive` whose weight comes out positive
    is dropped (weight 0) and the rest refitted, the worst first, until none is."""
    mean, scale = values.mean(axis=0), values.std(axis=0) + 1e-9
    kept = list(range(values.shape[1]))
    while True:
        free = answerability.fit(values[:, kept], answerable, l2)
        weights = np.asarray(free.weights)  # standardised as the full fit is: same mean and scale per column
        wrong = [(w, c) for w, c in zip(weights, kept) if FEATURES[c] in non_positive and w > 0]
        if not wrong:
            break
        kept.remove(max(wrong)[1])
    full = np.zeros(values.shape[1])
    full[kept] = weights
    return Verifier(tuple(map(float, mean)), tuple(map(float, scale)), tuple(map(float, full)), free.bias)
from optimize.evaluate import squad
from optimize.evaluate.squad_metrics import auc, scored


def decide(verifier, predicted):
    spans, _, features = predicted
    return spans, {qid: verifier.score(values) for qid, values in features.items()}


def loo(data, predicted, non_positive):
    """Each validation article scored by a verifier and threshold fitted on the other three."""
    total = 0.0
    for article in sorted({e.article for e in data}):
        train = [e for e in data if e.article != article]
        held = [e for e in data if e.article == article]
        verifier = fit(np.array([predicted[2][e.id] for e in train]),
                                     np.array([bool(e.answers) for e in train]), non_positive=non_positive)
        threshold = squad.best_threshold(train, *decide(verifier, predicted))
        total += scored(held, *decide(verifier, predicted), threshold)["metrics"]["overall_f1"] * len(held)
    return total / len(data)


dump = pickle.load(open(sys.argv[1], "rb"))
for model, splits in dump.items():
    validation, v_pred = splits["validation"]
    print(f"== {model}")
    for name, non_positive in [("free", ()), ("non-positive absence", NON_POSITIVE)]:
        verifier = fit(np.array([v_pred[2][e.id] for e in validation]),
                                     np.array([bool(e.answers) for e in validation]), non_positive=non_positive)
        threshold = squad.best_threshold(validation, *decide(verifier, v_pred))
        row = {}
        for split in ("validation", "test", "everyday"):
            data, predicted = splits[split]
            result = scored(data, *decide(verifier, predicted), threshold)
            row[split] = result
        test = row["test"]["metrics"]
        showcase_data, showcase_pred = splits["showcase"]
        shown = decide(verifier, showcase_pred)[1]
        print(f"  {name:22s} weights {[round(w, 3) for w in verifier.weights]} threshold {threshold:.3f}")
        print(f"    validation F1 {row['validation']['metrics']['overall_f1']:.2f} (leave-one-article-out "
              f"{loo(validation, v_pred, non_positive):.2f}) | test F1 {test['overall_f1']:.2f} "
              f"(HasAns {test['HasAns_f1']:.2f} / NoAns {test['NoAns_f1']:.2f}) AUC "
              f"{auc(splits['test'][0], row['test']['scores']):.3f} | everyday F1 {row['everyday']['metrics']['overall_f1']:.2f}")
        print("    showcase " + "; ".join(f"{e.question} [{'long' if 'third' in e.context else 'short'}] "
                                          f"{shown[e.id]:.3f} {'answers' if shown[e.id] > threshold else 'abstains'}"
                                          for e in showcase_data))
