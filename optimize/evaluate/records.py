"""Records a fresh machine reads instead of measuring again, and the keys that make a changed
input miss them (ARCHITECTURE.md, "Records"): the reference side of every comparison, per source
fingerprint; where a preset's records live; `SHOWDOWN_NO_RECORDS=1` to read none."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from models import settings
from models.catalog import PRESETS, artifacts_root
from models.machine import measured_stamp
from models.manifest import locked, source_fingerprint, write_atomically
from models.runners import prompt_lookup


def record_path(preset_name: str, committed: Path, user_file: str) -> Path:
    """A built-in preset's record is `committed` with the project; a user preset's lives with its artifacts."""
    return committed if preset_name in {p.name for p in PRESETS} else artifacts_root() / user_file


def content_key(value) -> str:
    """A short hash of JSON-able inputs, for a reference-cache entry that depends on them."""
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()[:12]


def training_record(source: Path) -> dict | None:
    """A source's training.json, parsed once for every caller that needs it; None for a Hub model."""
    training = Path(source) / "training.json"
    return json.loads(training.read_text()) if training.exists() else None


REFERENCE_RECORD = Path(__file__).with_name("reference_record")


def records_off() -> bool:
    """SHOWDOWN_NO_RECORDS=1 (`python -m optimize verify`): no committed or cached record is read;
    everything is measured on this machine."""
    return bool(settings.flag("SHOWDOWN_NO_RECORDS", False))


MEASURED_HERE: dict[str, dict] = {}  # records off: what this verify run measured, by model and set (optimize/verify.py)


def model_record(preset_name: str, directory: Path, committed: Path, user_file: str, set_key: str,
                 measure: Callable[[], dict], to_entry: Callable[[dict], dict], from_entry: Callable[[dict], dict]) -> dict:
    """A measure of the model in `directory` that depends only on its files and on `set_key` (the
    questions or prompts, and how they are asked): the same bytes give the same greedy answers, so
    it is read from the record when these exact files were measured on this set, with "recorded"
    saying when and on which CPU; otherwise `measure()` runs here and the record keeps it
    (`to_entry`/`from_entry` convert). `optimize verify` (records off) writes nothing and reads no
    record: it measures each model once per process (a baseline is the source of two variants)."""
    forced = prompt_lookup()  # SHOWDOWN_PROMPT_LOOKUP overrides the decoding the files say: another text, another key
    key = f"{source_fingerprint(directory)[:16]}-{set_key}" + ("" if forced is None else f"-lookup-{'on' if forced else 'off'}")
    if records_off():
        if key not in MEASURED_HERE:
            MEASURED_HERE[key] = measure()
        return MEASURED_HERE[key]
    path = record_path(preset_name, committed, user_file)
    entries = json.loads(path.read_text()) if path.exists() else {}
    if key in entries:
        return {**from_entry(entries[key]), "recorded": entries[key]["measured"]}
    result = measure()
    entry = {"model": f"{preset_name}/{Path(directory).name.removesuffix('.partial')}",
             "measured": measured_stamp(), **to_entry(result)}
    _merge_entry(path, key, entry)  # minutes passed while measuring: another build may have added entries since
    return result


def _merge_entry(path: Path, key: str, value) -> None:
    """One entry into a JSON record file, re-read and written under its lock so that no writer's entries are lost."""
    with _writing_alone(path):
        entries = json.loads(path.read_text()) if path.exists() else {}
        entries[key] = value
        write_atomically(path, json.dumps(dict(sorted(entries.items())), indent=1) + "\n")


def _writing_alone(path: Path):
    """One writer of a record file at a time: a lock under <artifacts>/locks, held for a read and a write."""
    return locked(artifacts_root() / "locks" / (hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16] + ".lock"))


def reference_cache(source: Path, kind: str, compute) -> dict:
    """The reference side of a comparison depends only on the source's weights: computed once per
    source fingerprint and reused by every variant built from it (builds of 4 variants share 2).
    The default presets' sources were measured once and are committed in `reference_record/` (the
    same files, copied from `<artifacts>/reference-cache/`), so a fresh machine's first build
    measures only its variants (issue 29); any other source is measured here."""
    path, *known = _reference_paths(source, kind)
    for found in (path, *known):
        if found.exists():
            return json.loads(found.read_text())
    value = compute()
    write_atomically(path, json.dumps(value))
    _stamp(path)
    return value


STAMPS = "measured.json"  # beside the measures of a reference folder: file name -> "date, CPU (ISA)"


def _stamp(path: Path) -> None:
    """When and on which CPU the measure in `path` was made, kept with it (a copy to reference_record/ takes the line)."""
    _merge_entry(path.with_name(STAMPS), path.name, measured_stamp())


def reference_recorded(source: Path, kind: str) -> str | None:
    """When and where the committed record that `reference_cache` reads for this source was measured;
    None when the measure is (or will be) this machine's own."""
    path, *known = _reference_paths(source, kind)
    if path.exists() or not known or not known[0].exists():
        return None
    stamps = known[0].with_name(STAMPS)
    return (json.loads(stamps.read_text()) if stamps.exists() else {}).get(known[0].name, "date and CPU not recorded")


def reference_origin(source: Path, kind: str) -> str:
    """Where `reference_cache` finds (or will put) this source's measure: what a record shown from it must say."""
    recorded = reference_recorded(source, kind)
    return "measured here" if recorded is None else f"read from the committed reference record (measured {recorded})"


def _reference_paths(source: Path, kind: str) -> list[Path]:
    """This machine's cache first (what was measured here), then the committed record; `optimize verify`: its own cache only."""
    name = f"{kind}-{source_fingerprint(source)[:16]}.json"
    if records_off():  # `optimize verify`: measured here, kept apart from the records
        return [artifacts_root() / "verify-cache" / name]
    return [artifacts_root() / "reference-cache" / name, REFERENCE_RECORD / name]
