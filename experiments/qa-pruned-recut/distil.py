"""Issue 48 / the `pruned` promise: R2 of RULE.md, D1's stage (experiments/qa-pruned-distil-b3) with R1 (B3 cut
again and distilled on all of SQuAD 1.1: `python -m optimize prune ... --output
artifacts/candidates/qa-minilm-squad2-pruned-recut`) as the student. Resumable: the same command continues after
a stop; its log is under artifacts/train-jobs/. Validation only.

    PYTHONPATH=. python experiments/qa-pruned-recut/distil.py R1_FOLDER [--stop-after STEPS] [--output FOLDER]

R4 of RULE-R3.md is the same stage with R3 as the student: `distil.py R3_FOLDER --output
artifacts/candidates/qa-minilm-squad2-pruned-recut-r4`.

R5 of RULE-R5.md: the same stage with half of the null-labelled windows: `distil.py R3_FOLDER --null-fraction 0.5
--output artifacts/candidates/qa-minilm-squad2-pruned-recut-r5`.

R1_FOLDER: the published R1, or its `.partial` staging folder when it missed the build's gate (RULE.md reads the
loop's validation for both).
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from models.catalog import REPO_ROOT, artifacts_root

sys.path.insert(0, str(REPO_ROOT / "experiments" / "qa-pruned-distil-b3"))
import distil as d1  # noqa: E402  (D1's script: its folder name is no package name)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("r1", type=Path)
    parser.add_argument("--stop-after", type=int, metavar="STEPS")
    parser.add_argument("--null-fraction", type=float, help="share of null-labelled windows kept (D1's stage: 1.0)")
    parser.add_argument("--output", type=Path, default=artifacts_root() / "candidates" / "qa-minilm-squad2-pruned-recut-r2")
    args = parser.parse_args()
    train_config = dataclasses.replace(d1.config(args.r1.resolve()), output=args.output.resolve())
    recipe = ""
    if args.null_fraction is not None:
        train_config = dataclasses.replace(train_config, null_fraction=args.null_fraction)
        recipe = f", null-labelled windows kept: {args.null_fraction}"
    result = d1.main(args.stop_after, train_config, student_dir=args.r1.resolve(), recipe=recipe)
    print({k: v for k, v in result.items() if k in ("stopped", "checkpoint", "validation", "validation_score")})
