"""The `pruned` promise of a QA model that is trained, not built (the default `pruned` is committed under
weights/): within 3 points of the baseline on SQuAD 2.0 F1 and on forced-span F1 on the validation articles,
paired per question. The build gates what it builds; this measures what it does not. A QA build writes it
beside the variant's artifacts (`<artifacts>/<preset>/<variant>/promise.json`, which the app shows), and
`optimize verify` measures it again with no record read."""
from __future__ import annotations

import json

from models.catalog import Preset
from models.machine import measured_stamp
from models.manifest import write_atomically
from models.recorded import PROMISE_RECORD, promise_fingerprints, promise_record
from models.runners import load_runner
from models.sources import resolve
from optimize.evaluate import squad
from optimize.evaluate.accuracy import qa_accuracy, qa_against, qa_reference_kind, threshold_split
from optimize.evaluate.gates import failures, promise_line
from optimize.evaluate.records import reference_cache, reference_origin
from optimize.evaluate.squad_metrics import HeldOut


def trained_pruned(preset: Preset) -> list[str]:
    """The QA variants that promise `pruned` without a build to gate them: trained PyTorch models beside the baseline."""
    if preset.task != "qa":
        return []
    return [spec.name for spec in preset.variants
            if spec.runtime == "torch" and spec.name != "baseline" and spec.source.kind != "built"]


def measure(preset: Preset, variant: str) -> dict:
    """The variant's validation measures beside the baseline's, paired per question, with the promise's line and
    misses. Both sides' per-question scores are the builds' own (reference cache or committed reference record:
    `optimized` and `pruned-optimized` are built from them); with records off, measured here."""
    directories = {name: resolve(preset, preset.variant(name)) for name in ("baseline", variant)}
    split = threshold_split(directories["baseline"])
    if threshold_split(directories[variant]) != split:
        raise ValueError(f"{preset.name}: {variant} and the baseline tune their thresholds on different articles")
    held_out = HeldOut.load(split=split)

    def scores(name: str) -> dict:
        directory = directories[name]
        return reference_cache(directory, qa_reference_kind(split),
                               lambda: qa_accuracy(load_runner("qa", name, "torch", directory), held_out))

    origins = {name: reference_origin(directories[name], qa_reference_kind(split)) for name in directories}
    own = {key: value for key, value in scores(variant).items() if key != "verifier"}
    metrics = {key: value for key, value in qa_against(own, scores("baseline")).items()
               if not key.startswith("_") and key != "verifier"}
    metrics["promise"] = "pruned"
    metrics["summary"] = promise_line("qa", "torch", metrics)
    metrics["scores_from"] = ("per-question scores " + origins["baseline"] if len(set(origins.values())) == 1 else
                              "; ".join(f"{name}'s per-question scores {origin}" for name, origin in origins.items()))
    if missed := failures("qa", "torch", metrics):
        metrics["gates_missed"] = missed
    return metrics


def ensure(preset: Preset, variant: str) -> dict | None:
    """The record for the files here: read, or measured and written (seconds when both sides' scores are cached);
    None without the SQuAD data."""
    if not squad.DEFAULT_SQUAD_PATH.exists():
        return None
    path, baseline = (resolve(preset, preset.variant(name)) for name in (variant, "baseline"))
    if (entry := promise_record(preset, variant, path, baseline)) is not None:
        return entry
    entry = {"fingerprints": promise_fingerprints(variant, path, baseline), "measured": measured_stamp(),
             "metrics": measure(preset, variant)}
    write_atomically(preset.built_dir(variant) / PROMISE_RECORD, json.dumps(entry, indent=1) + "\n")  # never half a file
    return entry
