"""A variant's accuracy as the app shows it, read from what built or trained it: the build's manifest, the
training run's record (with a trained `pruned`'s promise, recorded by the QA build), or, for a generation
baseline, what its variants' builds measured of it. Nothing here measures."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from models.catalog import Preset
from models.manifest import source_fingerprint

PROMISE_RECORD = "promise.json"  # written by optimize/evaluate/pruned_promise.py


def _read_json(path: Path) -> dict:
    """A record's content; {} when absent or unreadable: a cut-short manifest is the variant's fault (its status says
    so, from verify), and it had stopped the app's start and every other variant's status with a trace."""
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


def recorded_accuracy(preset: Preset, variant: str, path: Path | None, locate: Callable[[str], Path | None]) -> dict:
    """`locate`: another variant's directory if it is here (None otherwise), without fetching or building it."""
    if path is None:
        return {}
    manifest = _read_json(path / "manifest.json")
    if manifest.get("metrics"):
        return manifest["metrics"]
    training = _read_json(path / "training.json")
    where = training.get("trained_on") or training.get("device", "elsewhere")
    looks = training.get("test_looks") or []  # the held-out scores' last measure, when and on which CPU
    when = training.get("held_out_measured") or (f"{looks[-1]['date']}, {where}" if looks else where)
    recorded = {"recorded": f"by its training run, {when}"}
    if training.get("held_out"):
        return {**training["held_out"], **recorded, **promise(preset, variant, path, locate("baseline"))}
    if training:
        return {"split": "test articles " + ", ".join(training["articles"]["test"]), **training["test"], **recorded}
    if preset.task == "generation" and variant == "baseline":
        return _generation_baseline(preset, locate)
    return promise(preset, variant, path, locate("baseline"))  # a Hub preset's pruned model: its promise alone, if measured


def promise_fingerprints(variant: str, path: Path, baseline: Path) -> dict[str, str]:
    """What a promise record is for: these files of the variant and of the baseline."""
    return {"baseline": source_fingerprint(baseline)[:16], variant: source_fingerprint(path)[:16]}


def promise_record(preset: Preset, variant: str, path: Path, baseline: Path | None) -> dict | None:
    """The record the QA build wrote for these files, or the one `optimize push` put in the variant's own repo, in the
    commit of the weights it was paired for (a Space reads that one: its downloads are not the files fingerprinted)."""
    shipped = _read_json(path / PROMISE_RECORD)
    if shipped:
        return shipped
    entry = _read_json(preset.built_dir(variant) / PROMISE_RECORD)
    if not entry or baseline is None or entry.get("fingerprints") != promise_fingerprints(variant, path, baseline):
        return None
    return entry


def promise(preset: Preset, variant: str, path: Path, baseline: Path | None) -> dict:
    """A trained `pruned`'s promise against the baseline on validation, with its misses, if recorded for these files."""
    entry = promise_record(preset, variant, path, baseline) if variant != "baseline" else None
    if entry is None:
        return {}
    metrics = entry["metrics"]
    origin = f"; {metrics['scores_from']}" if metrics.get("scores_from") else ""
    return {"promise": "pruned", "summary": f"{metrics['summary']} (paired by the build, {entry['measured']}{origin})",
            **({"gates_missed": metrics["gates_missed"]} if metrics.get("gates_missed") else {})}


def _generation_baseline(preset: Preset, locate: Callable[[str], Path | None]) -> dict:
    """The baseline's measures as its variants' builds recorded them beside their own."""
    reference: dict = {}
    names = {v.name for v in preset.variants}
    for built in ("pruned", "optimized"):  # both measured against the baseline
        path = locate(built) if built in names else None
        reference.update(_read_json(path / "manifest.json").get("metrics", {}) if path else {})
    if "reference_perplexity" not in reference:
        return {}
    optional = {"instruction_pct": "reference_instruction_pct", "instruction_recorded": "reference_instruction_recorded",
                "reading_recorded": "reference_reading_recorded", "perplexity_recorded": "reference_recorded"}
    out = {"agreement_pct": 100.0, "perplexity": reference["reference_perplexity"], "note": "reference",
           **{key: reference[source] for key, source in optional.items() if source in reference}}
    if "reference_reading_f1_ci95" in reference:
        out.update(reading_f1=reference["reference_reading_f1"], reading_questions=reference["reading_questions"],
                   reading_f1_ci95=reference["reference_reading_f1_ci95"])
    return out
