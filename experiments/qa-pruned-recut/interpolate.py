"""Issue 48, RULE-R5.md: the QA `pruned` candidates on the line between R3 and R4 (R4 is R3 plus D1's stage), every
weight `(1 - t) * R3 + t * R4`, scored on validation by the training loop's own function. R3 (t = 0) and R4 (t = 1)
are scored first and must reproduce their recorded validation, so the script is checked before any candidate is read.
Validation only: the test articles are scored later, by `remeasure-qa`, and only if the rule says so.

    PYTHONPATH=. python experiments/qa-pruned-recut/interpolate.py [--r3 FOLDER] [--r4 FOLDER]
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from models.catalog import artifacts_root
from models.manifest import sha256
from models.qa import QAConfig
from optimize.evaluate import squad
from optimize.evaluate.squad_metrics import evaluate_model
from optimize.train.finetune_qa import save_fp16, validation_score

CANDIDATES = artifacts_root() / "candidates"
POINTS = (0.25, 0.50, 0.75)
REPRODUCED_WITHIN = 0.05
COPIED = ("config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt")


def interpolated(start: dict[str, torch.Tensor], end: dict[str, torch.Tensor], t: float) -> dict[str, torch.Tensor]:
    """`(1 - t) * start + t * end` (fp32 weights)."""
    return {name: (1 - t) * start[name] + t * end[name] for name in start}


def scored(folder: Path, validation: list[squad.Example]) -> dict:
    """The training loop's validation (`validation_tracker`'s numbers) of the model in `folder`."""
    model = AutoModelForQuestionAnswering.from_pretrained(folder, dtype=torch.float32).eval()
    result = evaluate_model(model, AutoTokenizer.from_pretrained(folder), validation, QAConfig())
    metrics, forced = result["metrics"], result["forced_metrics"]
    return {"overall_f1": round(metrics["overall_f1"], 2), "HasAns_f1": round(metrics["HasAns_f1"], 2),
            "NoAns_f1": round(metrics["NoAns_f1"], 2), "forced_HasAns_f1": round(forced["HasAns_f1"], 2),
            "threshold": round(result["threshold"], 2), "validation_score": round(validation_score(metrics, forced), 2),
            "fingerprint": sha256(folder / "model.safetensors")[:16]}


def check_reproduced(folder: Path, measured: dict) -> None:
    recorded = json.loads((folder / "training.json").read_text())
    recorded_forced = next(h for h in recorded["history"] if h["epoch"] == recorded["best_epoch"])["forced_HasAns_f1"]
    pairs = {"overall_f1": recorded["validation"]["overall_f1"], "forced_HasAns_f1": recorded_forced}
    if off := {k: (measured[k], v) for k, v in pairs.items() if abs(measured[k] - v) > REPRODUCED_WITHIN}:
        raise SystemExit(f"{folder.name} does not reproduce its recorded validation (measured, recorded): {off}")


def main(r3: Path, r4: Path) -> dict:
    validation = squad.examples(squad.load_articles(squad.DEFAULT_SQUAD_PATH), squad.WIDE_VALIDATION.validation)
    results = {}
    for name, folder in (("R3", r3), ("R4", r4)):
        results[name] = scored(folder, validation)
        check_reproduced(folder, results[name])
        print(name, results[name], flush=True)
    start, end = ({name: weight.float() for name, weight in load_file(folder / "model.safetensors").items()}
                  for folder in (r3, r4))  # fp16 files, read once
    model = AutoModelForQuestionAnswering.from_pretrained(r3, dtype=torch.float32)
    for t in POINTS:
        output = CANDIDATES / f"qa-minilm-squad2-pruned-i{round(t * 100)}"
        output.mkdir(parents=True, exist_ok=True)
        for name in COPIED:
            shutil.copy(r3 / name, output / name)
        model.load_state_dict(interpolated(start, end, t))
        save_fp16(model, output)
        results[f"I{round(t * 100)}"] = scored(output, validation)
        print(f"I{round(t * 100)}", results[f"I{round(t * 100)}"], flush=True)
        (output / "validation.json").write_text(json.dumps({"t": t, "r3": str(r3), "r4": str(r4),
                                                            **results[f"I{round(t * 100)}"]}, indent=1) + "\n")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--r3", type=Path, default=CANDIDATES / "qa-minilm-squad2-pruned-r3.partial")
    parser.add_argument("--r4", type=Path, default=CANDIDATES / "qa-minilm-squad2-pruned-recut-r4")
    args = parser.parse_args()
    print(json.dumps(main(args.r3, args.r4), indent=1))
