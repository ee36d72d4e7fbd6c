"""RULE.md's ship step, run only when evaluate.py's decision sends a snapshot to the test sets: the chosen
snapshot's adapters stacked on the shipped delta (one rank-(128+64) adapter per weight, optimize.prune.decoder.
stack_deltas, so a fresh clone assembles it as before), written as a new plan + delta folder. It then checks
that the folder assembles to the model evaluate.py measured (fp16 storage of the adapters aside) and prints
the build command; the build's own gates decide whether it ships.

Usage: PYTHONPATH=. python experiments/pruned-instruction-recovery-long/ship.py WORK OUTPUT [RULE]
       (OUTPUT: weights/generation-smollm2-pruned to replace the shipped one; git keeps the old;
        RULE: the round's rule, named in the plan; this folder's RULE.md by default)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "experiments" / "pruned-instruction-recovery"))

from distil import baseline_dir, load_pruned  # noqa: E402
from evaluate import merge_snapshot  # noqa: E402

SHIPPED = REPO / "weights" / "generation-smollm2-pruned"


def main(work: Path, output: Path, rule: str = "experiments/pruned-instruction-recovery-long/RULE.md") -> None:
    from optimize.prune import decoder

    decision = json.loads((work / "decision.json").read_text())
    if not decision.get("goes_to_test"):
        raise SystemExit(f"RULE.md: {decision.get('chosen')} does not go to the test sets; nothing to ship")
    chosen = decision["chosen"]
    snapshot = work / f"snapshot-{chosen.split('-')[1]}.pt"
    dropped, kept_neurons, shipped = decoder.load_recovery(SHIPPED)
    plan = json.loads((SHIPPED / decoder.PLAN_FILE).read_text())
    saved = torch.load(snapshot, weights_only=False)
    second = {"rounds": "the shipped GPU round, then this CPU round's adapters stacked on it",
              "steps": saved["step"], "rank": saved["rank"], "alpha": saved["alpha"],
              "rule": rule, "chosen": chosen,
              "validation": decision["candidates"][chosen]}
    details = {k: v for k, v in plan.items() if k not in ("dropped_layers", "ffn_kept")}
    measured = load_pruned()  # becomes the model evaluate.py measured
    decoder.save_recovery(output, dropped, kept_neurons, decoder.stack_deltas(shipped, merge_snapshot(measured, saved)),
                          {**details, "second_recovery": second})
    assembled = decoder.assembled(baseline_dir(), output)
    worst = max((a - b).abs().max().item() for a, b in zip(assembled.state_dict().values(), measured.state_dict().values()))
    print(f"written {output}; largest weight difference from the evaluated model {worst:.2e} (fp16 adapters)")
    print("next: python -m optimize build --task generation (its gates decide; the instruction set is read once)")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:4])
