"""Rule 2 of RULE.md, after a candidate's one test look (its null threshold and verifier are fitted on
validation by `remeasure-qa`): with "no answer" allowed, how many of the 38 answerable everyday questions
get an answer, and the app's two seed questions. PyTorch, through the runtime's own QA path.

    PYTHONPATH=. python experiments/qa-pruned-distil-b3/everyday.py MODEL_DIR [MODEL_DIR ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

from models.qa import answer
from models.runners import load_runner
from optimize.evaluate import squad
from ui.tasks import SEED_CONTEXT  # the app's seed example


def measure(model_dir: Path) -> dict:
    runner = load_runner("qa", "pruned", "torch", model_dir)
    answerable = [e for e in squad.everyday_examples() if e.answers]
    answered = sum(bool(answer(runner, e.question, e.context, True)["answer"]) for e in answerable)
    seed = answer(runner, "Who worked a little bit harder?", SEED_CONTEXT, True)["answer"]
    wolf = answer(runner, "What did the wolf eat for breakfast?", SEED_CONTEXT, True)["answer"]
    return {"model": str(model_dir), "answered": answered, "answerable": len(answerable), "seed": seed,
            "seed_ok": "the second little pig" in seed.lower(), "wolf": wolf, "wolf_abstains": wolf == ""}


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        print(measure(Path(folder)))
