"""Validation measures of RULE.md for the baseline, the shipped `pruned` (step 0) and each snapshot of
`distil.py` (or of ../pruned-instruction-recovery-long/distil_long.py, given its WORK), then the rule's
choice. Each model's result is kept in WORK/eval-<name>.json, so a stopped run measures only what is
missing. Reads no test set.

Usage: PYTHONPATH=. python experiments/pruned-instruction-recovery/evaluate.py [WORK] [--threads N] [--only A,B]
"""
from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from distil import CONFIG, WORK, load_baseline, load_pruned  # noqa: E402

log = logging.getLogger("instruction-recovery")


def validation_prompts() -> list[dict]:
    return json.loads((HERE / "validation_set.json").read_text())["prompts"]


def reading_questions() -> list:
    from optimize.evaluate import squad

    return [e for e in squad.examples(squad.load_articles(), squad.WIDE_VALIDATION.validation) if e.answers]


def measure(name: str, load, tokenizer, work: Path) -> dict:
    """The model `load()` returns, measured once: a kept result is read back without loading the model."""
    from optimize.evaluate import instructions, reading
    from optimize.train.recover_decoder import in_memory_runner

    cached = work / f"eval-{name}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    model = load()
    started = time.perf_counter()
    runner = in_memory_runner(model, tokenizer, work)
    asked = instructions.measure(runner, validation_prompts())
    read = reading.measure(runner, reading_questions())
    result = {"name": name, "instructions_passed": asked["passed"], "by_kind": asked["by_kind"],
              "passed_by_prompt": {k: v["passed"] for k, v in asked["answers"].items()},
              "reading_f1": read["reading_f1"], "questions": read["questions"], "per_question": read["per_question"],
              "seconds": round(time.perf_counter() - started)}
    cached.write_text(json.dumps(result))
    log.info("%s: validation instructions %d/60 %s, reading F1 %.2f (%d s)", name, result["instructions_passed"],
             result["by_kind"], result["reading_f1"], result["seconds"])
    return result


def merge_snapshot(student, saved: dict) -> dict[str, torch.Tensor]:
    """A loaded snapshot's adapters and norm gains merged into `student` (the shipped `pruned`); returns them as
    merge_lora gives them (B scaled), the delta a ship step stacks on the shipped one (../pruned-instruction-recovery-long/ship.py)."""
    from optimize.train import recover_decoder as recover

    recover.add_lora(student, saved.get("rank", CONFIG.rank), saved.get("alpha", CONFIG.alpha))  # the long round's rank
    parameters = dict(student.named_parameters())
    with torch.no_grad():
        for name, value in saved["params"].items():
            parameters[name].copy_(value)
    delta = recover.merge_lora(student)
    student.eval()
    return delta


def snapshot_model(student, snapshot: Path):
    """The shipped `pruned` with the snapshot's adapters and norm gains, merged."""
    merge_snapshot(student, torch.load(snapshot, weights_only=False))
    return student


def choose(results: dict[str, dict]) -> dict:
    """RULE.md: eligible = reading >= 90 % of the baseline's and >= step 0's - 1.0; the most validation
    prompts passed (ties: the earlier step); it goes to test only with >= 3 more than step 0."""
    from optimize.evaluate.intervals import paired_delta

    baseline, step0 = results["baseline"], results["step-0"]
    rows = {}
    for name, result in results.items():
        if name == "baseline":
            continue
        rows[name] = {"instructions_passed": result["instructions_passed"], "by_kind": result["by_kind"],
                      "reading_f1": result["reading_f1"],
                      "reading_of_baseline_pct": round(100 * result["reading_f1"] / baseline["reading_f1"], 1),
                      "reading_vs_step0": paired_delta(step0["per_question"], result["per_question"])}
    eligible = [name for name, row in rows.items() if name != "step-0" and row["reading_of_baseline_pct"] >= 90
                and row["reading_f1"] >= step0["reading_f1"] - 1.0]
    chosen = max(eligible, key=lambda n: (rows[n]["instructions_passed"], -int(n.split("-")[1])), default=None)
    goes = chosen is not None and rows[chosen]["instructions_passed"] >= step0["instructions_passed"] + 3
    return {"baseline": {"instructions_passed": baseline["instructions_passed"], "by_kind": baseline["by_kind"],
                         "reading_f1": baseline["reading_f1"]},
            "candidates": rows, "eligible": eligible, "chosen": chosen, "goes_to_test": goes}


def main(work: Path, threads: int, only: set[str] | None) -> None:
    """`only`: measure just these models (two processes of one thread each measure two models in less time than
    one of two threads measures them in turn); the decision is written once every model is measured."""
    from transformers import AutoTokenizer

    from distil import baseline_dir

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir())
    loaders = {"baseline": lambda: load_baseline()[1], "step-0": load_pruned}
    for snapshot in sorted(work.glob("snapshot-*.pt"), key=lambda p: int(p.stem.split("-")[1])):
        loaders[f"step-{snapshot.stem.split('-')[1]}"] = lambda snapshot=snapshot: snapshot_model(load_pruned(), snapshot)
    results = {name: measure(name, load, tokenizer, work) for name, load in loaders.items() if only is None or name in only}
    if only is not None:
        return
    decision = choose(results)
    (work / "decision.json").write_text(json.dumps(decision, indent=2))
    print(json.dumps(decision, indent=2))


if __name__ == "__main__":
    import argparse

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser()
    parser.add_argument("work", nargs="?", type=Path, default=WORK)
    parser.add_argument("--threads", type=int, default=CONFIG.threads)
    parser.add_argument("--only", help="comma-separated models, e.g. baseline,step-0 (no decision written)")
    args = parser.parse_args()
    main(args.work, args.threads, set(args.only.split(",")) if args.only else None)
