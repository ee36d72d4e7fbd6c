"""Why does the pruned GPU candidate abstain on 26 of 38 answerable everyday questions, where the shipped
pruned model abstains on 6? Per model, from dumps of ../qa-answerability-verifier/hidden-probe/collect.py:
SQuAD 2.0 F1 on the validation articles and the everyday set at thresholds -0.6 ... 0.6 of the model's own
verifier, and each verifier input's mean contribution on the answerable questions of both sets.

PYTHONPATH=. python experiments/qa-more-epochs/everyday_collapse.py DUMP.pkl=MODEL_DIR ..."""
import json
import pickle
import sys

import numpy as np

from models.answerability import FEATURES, Verifier
from optimize.evaluate import squad
from optimize.evaluate.squad_metrics import answered

THRESHOLDS = [round(float(t), 1) for t in np.arange(-0.6, 0.61, 0.1)]

for argument in sys.argv[1:]:
    dump, model = argument.split("=", 1)
    rows = pickle.load(open(dump, "rb"))
    config = json.load(open(f"{model}/qa_config.json"))
    verifier, threshold = Verifier.from_dict(config["verifier"]), config["null_threshold"]
    print(f"{model}: threshold {threshold:.3f}")
    for split in ("validation", "everyday"):
        items = [r for r in rows.values() if r["split"] == split]
        examples = [r["example"] for r in items]
        spans = {r["example"].id: r["span"] for r in items}
        scores = {r["example"].id: verifier.score(r["cues"]) for r in items}
        curve = [round(squad.evaluate(examples, answered(spans, scores, t))["overall_f1"], 1) for t in THRESHOLDS]
        answerable = np.array([r["cues"] for r in items if r["example"].answers])
        contributions = ((answerable - verifier.mean) / np.array(verifier.scale) * np.array(verifier.weights)).mean(0)
        below = np.mean([scores[e.id] <= threshold for e in examples if e.answers])
        print(f"  {split:10s} F1 at thresholds {list(THRESHOLDS)}: {curve}")
        print(f"  {split:10s} answerable: mean margin {answerable[:, 0].mean():.2f}, null score {answerable[:, 1].mean():.2f}; "
              f"under the threshold {100 * below:.0f} %; contributions "
              + ", ".join(f"{name} {value:+.2f}" for name, value in zip(FEATURES, contributions)))
