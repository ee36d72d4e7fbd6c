"""The QA second-stage sweep (issue 27) on a lent GPU: soups and the choice; not part of the demo or tests.

Every candidate is `train-qa --answerability-stage` from the same stage-1 weights, so their weights
can be averaged (a uniform "model soup": same init, different data order and negatives). The choice
is fixed before any result: per model, the highest validation score (`finetune_qa.validation_score`,
the rule train-qa keeps epochs by) on the four validation articles; the test articles are scored by
train-qa's own `remeasure`, and are not read by this choice.
- `embed PRUNED BASELINE`: give the carried stage-1 pruned model its word embeddings back (frozen at the
  baseline's in its recovery, so they travel once).
- `soup OUT MEMBER...`: average the members' weights, save fp16 with the first member's config and tokenizer,
  score validation, write `soup.json`.
- `choose KIND DIR...`: print every candidate's validation score, copy the best folder to /tmp/chosen-KIND.
Usage on the device: experiments/gpu/gpu_qa_stage2.sh.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def embed(pruned: Path, baseline: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))  # its sibling, run as a script from the repo root
    from gpu_qa_full import restore_word_embeddings

    restore_word_embeddings(pruned / "model.safetensors", baseline)


def soup(out: Path, members: list[Path]) -> None:
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from optimize.evaluate import squad
    from optimize.evaluate.squad_metrics import evaluate_model
    from optimize.train.finetune_qa import TrainConfig

    states = [load_file(member / "model.safetensors") for member in members]
    average = {key: sum(state[key].float() for state in states) / len(states) for key in states[0]}
    shutil.copytree(members[0], out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("training.json", "README.md"))
    model = AutoModelForQuestionAnswering.from_pretrained(members[0], dtype=torch.float32)
    model.load_state_dict(average)
    model.half().save_pretrained(out, safe_serialization=True)
    model = model.float().to("cuda" if torch.cuda.is_available() else "cpu").eval()  # scored as saved: fp16 values
    config = TrainConfig(split=squad.WIDE_VALIDATION)
    validation = evaluate_model(model, AutoTokenizer.from_pretrained(out), squad.examples(
        squad.load_articles(config.data), config.split.validation), config.qa)
    record = {"members": [str(m) for m in members],
              "validation": {k: round(v, 2) for k, v in validation["metrics"].items()},
              "forced_HasAns_f1": round(validation["forced_metrics"]["HasAns_f1"], 2),
              "threshold": validation["threshold"]}
    record["score"] = (record["validation"]["overall_f1"] + record["forced_HasAns_f1"]) / 2  # as train-qa's history rounds
    (out / "soup.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))


def validation_of(folder: Path) -> float | None:
    if (folder / "soup.json").exists():
        return json.loads((folder / "soup.json").read_text())["score"]
    training = folder / "training.json"
    if not training.exists():
        return None
    best = json.loads(training.read_text())["history"]
    return max((epoch["overall_f1"] + epoch["forced_HasAns_f1"]) / 2 for epoch in best)


def choose(kind: str, folders: list[Path]) -> None:
    scores = {folder: validation_of(folder) for folder in folders}
    for folder, score in sorted(scores.items(), key=lambda item: -(item[1] or 0)):
        print(f"{kind} {folder.name}: validation score {score}")
    best = max((f for f in scores if scores[f] is not None), key=lambda f: scores[f])
    shutil.copytree(best, f"/tmp/chosen-{kind}", dirs_exist_ok=True)
    print(f"{kind} chosen: {best.name}")


if __name__ == "__main__":
    if sys.argv[1] == "embed":
        embed(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "soup":
        soup(Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]])
    elif sys.argv[1] == "choose":
        choose(sys.argv[2], [Path(p) for p in sys.argv[3:] if Path(p).is_dir()])
