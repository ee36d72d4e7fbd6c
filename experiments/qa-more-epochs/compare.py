"""A candidate QA model against the shipped one, per question, from a dump of
../qa-answerability-verifier/monotone/collect.py (both models in it, each with its own qa_config.json):
paired bootstrap intervals on SQuAD 2.0 F1 (each model's own verifier and threshold) and forced-span F1,
on the test, validation and everyday questions, and the everyday questions each abstains on. Usage:
PYTHONPATH=. python experiments/qa-more-epochs/compare.py DUMP.pkl SHIPPED_DIR CANDIDATE_DIR"""
import json
import pickle
import sys
from pathlib import Path

from models.answerability import Verifier
from optimize.evaluate import squad
from optimize.evaluate.intervals import paired_delta
from optimize.evaluate.squad_metrics import answered


def per_question(dump, model, split):
    """Per question id: SQuAD 2.0 F1 with the model's own verifier and threshold, forced-span F1 on
    the answerable ones, and the answerable questions it abstains on."""
    data, (spans, _, features) = dump[model][split]
    config = json.loads((Path(model) / "qa_config.json").read_text())
    verifier, threshold = Verifier.from_dict(config["verifier"]), config["null_threshold"]
    scores = {qid: verifier.score(values) for qid, values in features.items()}
    predictions = answered(spans, scores, threshold)
    f1 = {e.id: squad.score(e, predictions[e.id])[1] for e in data}
    forced = {e.id: squad.score(e, spans[e.id])[1] for e in data if e.answers}
    abstained = [(e.question, round(scores[e.id], 2)) for e in data if e.answers and not predictions[e.id]]
    return f1, forced, abstained, threshold


def paired(candidate, shipped):
    delta = paired_delta(shipped, candidate)
    return f"{delta['delta']:+.2f} (95 % CI {delta['ci95'][0]:+.2f} to {delta['ci95'][1]:+.2f})"


def mean(scores):
    return 100 * sum(scores.values()) / len(scores)


dump = pickle.load(open(sys.argv[1], "rb"))
shipped, candidate = sys.argv[2], sys.argv[3]
for split in ("test", "validation", "everyday"):
    old, new = per_question(dump, shipped, split), per_question(dump, candidate, split)
    print(f"{split:10s} SQuAD 2.0 F1 {mean(old[0]):.2f} -> {mean(new[0]):.2f}, {paired(new[0], old[0])} | "
          f"forced-span F1 {mean(old[1]):.2f} -> {mean(new[1]):.2f}, {paired(new[1], old[1])}")
for model in (shipped, candidate):
    _, _, abstained, threshold = per_question(dump, model, "everyday")
    print(f"{model}: abstains on {len(abstained)} answerable everyday questions (threshold {threshold:.3f}): {abstained}")
