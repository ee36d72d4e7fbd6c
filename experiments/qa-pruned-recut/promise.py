"""Rule 3 of RULE.md: does a candidate keep the `pruned` promise by the build's own path
(`optimize/evaluate/pruned_promise.py`: the verifier fitted on validation, paired per question against the
shipped baseline B3)? The default QA preset with its `pruned` pointed at the candidate's folder; the baseline's
per-question scores come from its reference record, the candidate's are measured here. Validation only: the
build's path scores the test articles too, in memory; only the validation entries and the gates (which read
validation) are printed, so rule 4's one look stays the first.

    PYTHONPATH=. python experiments/qa-pruned-recut/promise.py CANDIDATE_FOLDER
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from models.catalog import default_preset
from optimize.evaluate import pruned_promise


def candidate_preset(candidate: Path):
    preset = default_preset("qa")
    variants = tuple(dataclasses.replace(v, source=dataclasses.replace(v.source, location=str(candidate.resolve())))
                     if v.name == "pruned" else v for v in preset.variants)
    return dataclasses.replace(preset, variants=variants)


if __name__ == "__main__":
    metrics = pruned_promise.measure(candidate_preset(Path(sys.argv[1])), "pruned")
    shown = {key: value for key, value in metrics.items() if key.startswith(("validation", "reference_validation"))}
    print(json.dumps({**shown, "gates_missed": metrics.get("gates_missed", []), "scores_from": metrics["scores_from"]},
                     indent=1))
