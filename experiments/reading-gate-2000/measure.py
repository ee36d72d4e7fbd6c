"""Issue 49: each committed generation variant's reading comprehension on the 2,115-question set
(RULE.md), recorded per model in optimize/evaluate/reading_record.json, then the gate's numbers.

    python experiments/reading-gate-2000/measure.py [VARIANT ...]   (default: all four, baseline first)

Resumable: a model already in the record is read back, not measured again."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from models.catalog import default_preset  # noqa: E402
from models.runners import load_runner  # noqa: E402
from optimize.evaluate import reading  # noqa: E402
from optimize.evaluate.intervals import grouped_ratio  # noqa: E402

OUT = Path(__file__).with_name("scores.json")


def main(variants: list[str]) -> None:
    preset = default_preset("generation")
    scores = json.loads(OUT.read_text()) if OUT.exists() else {}
    for variant in variants:
        spec = preset.variant(variant)
        directory = preset.built_dir(variant)
        started = time.monotonic()
        result = reading.recorded(preset.name, directory, lambda: load_runner("generation", variant, spec.runtime, directory))
        seconds = time.monotonic() - started
        print(f"{variant}: reading F1 {result['reading_f1']} on {result['questions']} questions, "
              f"{seconds:.0f} s{' (from the record: ' + result['recorded'] + ')' if 'recorded' in result else ''}", flush=True)
        scores[variant] = {"reading_f1": result["reading_f1"], "questions": result["questions"], "seconds": round(seconds),
                           "per_question": result["per_question"]}
        OUT.write_text(json.dumps(scores))
    groups = reading.paragraph_groups()
    for variant, source in (("pruned", "baseline"), ("optimized", "baseline"), ("pruned-optimized", "pruned")):
        if variant in scores and source in scores:
            compared = grouped_ratio(scores[source]["per_question"], scores[variant]["per_question"], groups)
            print(f"{variant} vs {source}: {json.dumps(compared)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["baseline", "pruned", "optimized"])
