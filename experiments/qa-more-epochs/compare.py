"""A candidate QA model against the shipped one, per question, from a dump of
../qa-answerability-verifier/monotone/collect.py (both models in it, each with its own qa_config.json):
paired bootstrap intervals on SQuAD 2.0 F1 (each model's own verifier and threshold) and forced-span F1,
on the test, validation and everyday questions, and the everyday questions each abstains on. Usage:
PYTHONPATH=. python experiments/qa-more-epochs/compare.py DUMP.pkl SHIPPED_DIR CANDIDATE_DIR"""
import json
import pickle
import sys
from pathlib import Path

import numpy as np

from models.answerability import Verifier
from optimize.evaluate import squad


def per_question(dump, model, split):
    data, (spans, _, features) = dump[model][split]
    config = json.loads((Path(model) / "qa_config.json").read_text())
    verifier, threshold = Verifier.from_dict(config["verifier"]), config["null_threshold"]
    scores = {qid: verifier.score(values) for qid, values in features.items()}
    f1 = np.array([squad.score(e, spans[e.id] if scores[e.id] > threshold else "")[1] for e in data])
    forced = np.array([squad.score(e, spans[e.id])[1] for e in data if e.answers])
    abstained = [(e.question, round(scores[e.id], 2)) for e in data if e.answers and scores[e.id] <= threshold]
    return 100 * f1, 100 * forced, abstained, threshold


def paired(candidate, shipped, draws=4000):
    difference = candidate - shipped
    means = difference[np.random.default_rng(0).integers(0, len(difference), (draws, len(difference)))].mean(axis=1)
    return f"{difference.mean():+.2f} (95 % CI {np.percentile(means, 2.5):+.2f} to {np.percentile(means, 97.5):+.2f})"


dump = pickle.load(open(sys.argv[1], "rb"))
shipped, candidate = sys.argv[2], sys.argv[3]
for split in ("test", "validation", "everyday"):
    old, new = per_question(dump, shipped, split), per_question(dump, candidate, split)
    print(f"{split:10s} SQuAD 2.0 F1 {old[0].mean():.2f} -> {new[0].mean():.2f}, {paired(new[0], old[0])} | "
          f"forced-span F1 {old[1].mean():.2f} -> {new[1].mean():.2f}, {paired(new[1], old[1])}")
for model in (shipped, candidate):
    _, _, abstained, threshold = per_question(dump, model, "everyday")
    print(f"{model}: abstains on {len(abstained)} answerable everyday questions (threshold {threshold:.3f}): {abstained}")
