"""Does the shipped 20 % `pruned` SmolLM2 (and the long round's last snapshot) lose short-answer knowledge that the
baseline keeps, on prompts no model was chosen on (probe_prompts.py)? Prints each model's passes and the prompts
where they differ. Reads no test set and chooses nothing.

Usage: PYTHONPATH=. python experiments/pruned-short-answers/probe.py [OUT.json] [WORK]
       (WORK: also every snapshot-<step>.pt of a recovery round there, e.g. artifacts/instruction-recovery-short)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO), str(HERE), str(REPO / "experiments" / "pruned-instruction-recovery")]

from distil import load_baseline, load_pruned  # noqa: E402
from evaluate import snapshot_model  # noqa: E402
from probe_prompts import probe_prompts  # noqa: E402

from optimize.evaluate import instructions  # noqa: E402
from optimize.train.recover_decoder import in_memory_runner  # noqa: E402

LONG = REPO / "artifacts" / "instruction-recovery-long"


def main() -> None:
    torch.set_num_threads(2)
    tokenizer, baseline = load_baseline()
    models = {"baseline": lambda: baseline, "step-0": load_pruned}
    if (LONG / "snapshot-4000.pt").exists():
        models["long-step-4000"] = lambda: snapshot_model(load_pruned(), LONG / "snapshot-4000.pt")
    work = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    for snapshot in sorted(work.glob("snapshot-*.pt"), key=lambda p: int(p.stem.split("-")[1])) if work else ():
        models[f"{work.name}-{snapshot.stem}"] = lambda snapshot=snapshot: snapshot_model(load_pruned(), snapshot)
    results = {}
    for name, load in models.items():
        runner = in_memory_runner(load(), tokenizer, LONG)
        asked = instructions.measure(runner, probe_prompts())
        results[name] = {"passed": asked["passed"], "by_kind": asked["by_kind"],
                         "answers": asked["answers"]}
        print(name, asked["passed"], asked["by_kind"], flush=True)
    for item in probe_prompts():
        row = {name: results[name]["answers"][item["id"]]["passed"] for name in results}
        if len(set(row.values())) > 1:
            print(item["prompt"][:60].ljust(60), row, "|", results["step-0"]["answers"][item["id"]]["text"][:60].replace("\n", " "))
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
