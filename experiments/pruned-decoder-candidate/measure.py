"""Measure a committed generation pruning candidate the way the build measures `pruned`, without
touching the default artifacts: assemble it, gate it (perplexity, instruction set; agreement
shown), build its ONNX export with the default ladder, and time its decoding in one process,
alternating rounds (~128-token prompt, 64 new tokens, greedy), against the default `optimized` and
against the baseline exported with the same recipe as the candidate's export (issue 13 compares
like with like: when the candidate's weights leave the GGUF's grid, its export ships another recipe
than the default `optimized`'s). That same-recipe baseline export is a speed reference only: built
without its accuracy measurement, it is never served.

Usage: python experiments/pruned-decoder-candidate/measure.py weights/generation-smollm2-pruned-20pct [ROUNDS]
Writes experiments/pruned-decoder-candidate/pruning-candidate-<name>.json. The default artifacts (baseline, optimized) must be built.
"""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # run as a script: the project's packages come from the checkout


def main(recipe_dir: str, rounds: int = 7) -> dict:
    default_root = REPO / "artifacts"
    root = REPO / "artifacts" / "candidates" / Path(recipe_dir).name
    os.environ["SHOWDOWN_ARTIFACTS"] = str(root)
    (root / "generation-smollm2").mkdir(parents=True, exist_ok=True)
    for shared in ("generation-smollm2/baseline", "reference-cache"):  # the same baseline: no second conversion
        link = root / shared
        if not link.exists():
            link.symlink_to(default_root / shared)
    from models import catalog
    from optimize import build
    from optimize.quantize.recipes import OnnxRecipe

    preset = catalog.default_preset("generation")
    variants = tuple(dataclasses.replace(v, recipe_dir=recipe_dir) if v.name == "pruned" else v for v in preset.variants)
    preset = dataclasses.replace(preset, variants=variants)
    catalog.PRESETS = tuple(preset if p.name == preset.name else p for p in catalog.PRESETS)
    pruned_dir = build.build_assembled(preset, "pruned", strict=False)
    pruned = json.loads((pruned_dir / "manifest.json").read_text())["metrics"]
    exported_dir = build.build_onnx(preset, "pruned-optimized")
    exported = json.loads((exported_dir / "manifest.json").read_text())
    shipped = exported["inputs"]["recipes"][len(exported["metrics"].get("rejected_recipes", []))]
    recipe = OnnxRecipe(**{k: tuple(v) if isinstance(v, list) else v for k, v in shipped.items()})
    same_recipe_dir = build.build_onnx(preset, "optimized", recipe=recipe, evaluate=False)
    same_recipe = json.loads((same_recipe_dir / "manifest.json").read_text())
    result = {"recipe_dir": recipe_dir, "pruned": pruned, "pruned_optimized": {"steps": exported["steps"], **exported["metrics"]},
              "baseline_same_recipe": {"steps": same_recipe["steps"], "note": "speed reference only: accuracy not measured"},
              "decode": decode_ratio({"optimized": default_root / "generation-smollm2" / "optimized",
                                      "baseline, same recipe": same_recipe_dir}, exported_dir, rounds)}
    out = Path(__file__).parent / f"pruning-candidate-{Path(recipe_dir).name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


def decode_ratio(references: dict[str, Path], candidate_dir: Path, rounds: int) -> dict:
    """Decode tok/s of the candidate and of each reference, in rounds shuffled as the bench shuffles
    them (models/timing.py); the candidate's ratio to each reference, per round and of the medians."""
    import functools

    from models import generation
    from models.runners import load_runner
    from models.timing import timed_rounds
    from optimize.bench.run import BenchConfig, decode_rate, generation_prompt

    candidate = "candidate pruned-optimized"
    runners = {name: load_runner("generation", "optimized", "onnxruntime", path) for name, path in references.items()}
    runners[candidate] = load_runner("generation", "pruned-optimized", "onnxruntime", candidate_dir)
    prompt = generation_prompt(runners[candidate].tokenizer, BenchConfig().generation_prompt_tokens)
    calls = {name: functools.partial(generation.generate, runner, prompt, 64) for name, runner in runners.items()}
    speeds = {name: [{"tokens_per_s": decode_rate(result), "ttft_ms": result["ttft_ms"],
                      "new_tokens": result["new_tokens"], "seconds": seconds} for seconds, result in timings]
              for name, timings in timed_rounds(calls, rounds, warmup=1).items()}
    median = {name: statistics.median(s["tokens_per_s"] for s in values) for name, values in speeds.items()}
    versus = {name: {"ratio_median": round(median[candidate] / median[name], 3),
                     "ratio_per_round": [round(c["tokens_per_s"] / r["tokens_per_s"], 3)
                                         for c, r in zip(speeds[candidate], speeds[name])]}
              for name in references}
    return {"rounds": rounds, "median_decode_tokens_per_s": median, "rows": speeds, "versus": versus}


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 7)
