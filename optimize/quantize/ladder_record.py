"""Recipe rungs already measured and rejected, so a build does not spend minutes measuring them again.
The built-in presets' record is committed with the project (a fresh machine's first build skips
those minutes: issue 29); a user preset's lives with its artifacts.

A recorded rejection is reused only for the same preset and variant, the same source weights
(sha256), the same recipe, the same instruction-set class of CPU and the same ONNX Runtime version
(the INT8 kernels differ by both) and the same gated sets (`gated_on`: a rejection decided on other
data decides nothing now).
The manifest lists it with its recorded measures and says it was not re-measured. `build
--full-ladder` measures every rung again and rewrites the record.
"""
from __future__ import annotations

import json
import logging
from datetime import date
from pathlib import Path

import onnxruntime

from models.machine import isa
from models.manifest import write_atomically
from optimize.evaluate.records import record_path

RECORD = Path(__file__).with_name("ladder_record.json")
log = logging.getLogger(__name__)


def _key(preset_name: str, variant_name: str) -> str:
    return f"{preset_name}/{variant_name}@{isa()}"


def _read(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _why_not_this_run(entry: dict, source_sha256: str, gated_on: str | None) -> str | None:
    """Why a record entry does not hold for this build (other gated sets, ONNX Runtime or source weights), or None."""
    if entry.get("gated_on") != gated_on:
        return f"was gated on other data ({entry.get('gated_on', 'the QA test articles')}), so every rung is measured"
    if entry.get("onnxruntime") != onnxruntime.__version__:  # its kernels decided those gates
        return (f"was measured with ONNX Runtime {entry.get('onnxruntime', '(unnamed)')}, this is "
                f"{onnxruntime.__version__}, so every rung is measured")
    if entry["source_sha256"] != source_sha256:  # the source was retrained after the record
        return (f"for this CPU class ({entry['measured']}) is for other source weights, so every rung is measured; "
                "`python -m optimize build --full-ladder` refreshes it")
    return None


def known_rejections(preset_name: str, variant_name: str, source_sha256: str, gated_on: str | None = None) -> dict[str, dict]:
    """Recorded rejected rungs for this source on this CPU class and these gated sets, by canonical recipe JSON."""
    entry = _read(record_path(preset_name, RECORD, "ladder-record.json")).get(_key(preset_name, variant_name))
    if not entry:
        return {}
    if why := _why_not_this_run(entry, source_sha256, gated_on):
        log.warning("%s: the ladder record %s", _key(preset_name, variant_name), why)
        return {}
    return {canonical(rejected["recipe"]): {**rejected, "recorded": rejected.get("measured", entry["measured"])}
            for rejected in entry["rejected"]}


def record(preset_name: str, variant_name: str, source_sha256: str, rejected: list[dict], cpu: str,
           gated_on: str | None = None) -> None:
    path = record_path(preset_name, RECORD, "ladder-record.json")
    entries = _read(path)
    entries[_key(preset_name, variant_name)] = {"source_sha256": source_sha256, "measured": f"{date.today()}, {cpu} ({isa()})",
                                                "onnxruntime": onnxruntime.__version__,
                                                **({"gated_on": gated_on} if gated_on else {}),
                                                "rejected": [r for r in rejected if "recorded" not in r]}
    write_atomically(path, json.dumps(dict(sorted(entries.items())), indent=1) + "\n")


def add(preset_name: str, variant_name: str, source_sha256: str, rejected: list[dict], cpu: str,
        gated_on: str | None = None) -> None:
    """Rungs measured and rejected by a build that skipped the recorded ones (a rung new to the ladder):
    added to the record beside them, each with its own date, so a fresh machine skips it too; without a
    record for this source and gated data, they start one."""
    path = record_path(preset_name, RECORD, "ladder-record.json")
    entries = _read(path)
    entry = entries.get(_key(preset_name, variant_name))
    if not entry or _why_not_this_run(entry, source_sha256, gated_on):
        record(preset_name, variant_name, source_sha256, rejected, cpu, gated_on)
        return
    new = {canonical(r["recipe"]): {**r, "measured": f"{date.today()}, {cpu} ({isa()})"} for r in rejected if "recorded" not in r}
    kept = [r for r in entry["rejected"] if canonical(r["recipe"]) not in new]
    entries[_key(preset_name, variant_name)] = {**entry, "rejected": kept + list(new.values())}
    write_atomically(path, json.dumps(dict(sorted(entries.items())), indent=1) + "\n")


ADDED_FIELDS = {"minimum_bits": 32, "fold_minimums": False}  # recipe fields added after records were written: at their default, left out


def canonical(recipe: dict) -> str:
    """The recipe's key in the record; a field added later is left out at its default, so that the
    records written before it still name the same rungs."""
    return json.dumps({k: v for k, v in recipe.items() if ADDED_FIELDS.get(k, object()) != v}, sort_keys=True)
