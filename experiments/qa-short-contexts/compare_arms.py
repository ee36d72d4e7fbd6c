"""The two arms against each other and the shipped baseline: validation score (soup.py's measure),
the everyday null-score shift (from hidden-probe dumps), the showcase with "no answer" allowed, each
with the model's own verifier and threshold (qa_config.json, fitted on validation by train-qa).

PYTHONPATH=.:experiments/qa-model-soup python experiments/qa-short-contexts/compare_arms.py NAME=DIR:DUMP.pkl ..."""
import json
import pickle
import sys
from pathlib import Path

import numpy as np
from soup import measured, model_of, state, validation

from models import qa
from models.runners import load_runner

SEED = ("The first little pig was very lazy. He didn't want to work at all and he built his house out of straw. "
        "The second little pig worked a little bit harder but he was somewhat lazy too and he built his house out of "
        "sticks. Then, they sang and danced and played together the rest of the day.")
QUESTIONS = ("Who worked a little bit harder?", "What did the wolf eat for breakfast?")


def null_means(dump: str) -> dict[str, float]:
    rows = pickle.load(open(dump, "rb")).values()
    return {split: float(np.mean([r["cues"][1] for r in rows if r["split"] == split and r["example"].answers]))
            for split in ("validation", "everyday")}


for argument in sys.argv[1:]:
    name, rest = argument.split("=", 1)
    model_dir, dump = rest.split(":", 1)
    score = measured(model_of(state(model_dir)), validation, {"validation": validation})["validation"]
    nulls = null_means(dump)
    held_out = json.loads((Path(model_dir) / "training.json").read_text())["held_out"]
    runner = load_runner("qa", "baseline", "torch", Path(model_dir))
    showcase = {q: qa.answer(runner, q, SEED, True) for q in QUESTIONS}
    print(f"{name}: validation {score}; null score validation {nulls['validation']:.2f}, everyday {nulls['everyday']:.2f} "
          f"(shift {nulls['everyday'] - nulls['validation']:+.2f}); everyday F1 {held_out['everyday_f1']}; "
          + "; ".join(f"{q!r} -> {r['answer'] or 'no answer'!r} ({r['answerability']:+.3f} vs {r['null_threshold']:+.3f})"
                      for q, r in showcase.items()), flush=True)
