"""`python -m optimize verify [--task T] [--variant V]`: every gate of every built variant (or of the
variants named) measured again on this machine with no record read (the reading record, the reference
record, the reference cache), and where the records disagree with what was measured here.

A fresh machine's first build reads records measured elsewhere (ARCHITECTURE.md, "Records") to
start within minutes; this is the check that those records still describe the artifacts here.
Minutes per variant on 2 cores (reading comprehension decodes hundreds of answers per model). The sources'
QA measures it makes are kept in <artifacts>/verify-cache for later verify runs on this machine (measured
here, never a record from elsewhere); delete that folder to measure them again."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from models.catalog import Preset, Task, presets_from_environment
from models.machine import describe
from models.manifest import read_manifest
from models.recorded import promise_record
from models.reports import REPORTS_DIR
from models.runners import cpu_threads
from models.sources import resolve
from optimize.evaluate import accuracy, gates, pruned_promise, records

log = logging.getLogger(__name__)

# How far a measure may move between CPUs with the same bytes before it counts as a disagreement,
# where the record carries no interval: float rounding flips a few answers or tokens, no more.
POINTS = {"validation_f1": 1.0, "validation_forced_f1": 1.0,  # what QA's gates read (issue 48)
          "overall_f1": 1.0, "forced_f1": 1.0, "everyday_f1": 2.5, "agreement_pct": 1.0,
          "identical_continuations_pct": 5.0, "instruction_pct": 5.0}
RELATIVE = {"perplexity": 0.01, "reference_perplexity": 0.01}
INTERVALS = {"reading_f1": "reading_f1_ci95", "reference_reading_f1": "reference_reading_f1_ci95"}
NOT_BUILT = "not built with its gates measured"


@dataclass
class Finding:
    variant: str
    measure: str
    recorded: float | None
    here: float | None
    verdict: str  # "agrees", "disagrees", "gate missed here", "not verified"


def compare(variant: str, recorded: dict, here: dict) -> list[Finding]:
    out = []
    for measure in (*POINTS, *RELATIVE, *INTERVALS):
        if measure not in recorded or measure not in here:
            continue
        old, new = float(recorded[measure]), float(here[measure])
        if measure in INTERVALS and INTERVALS[measure] in recorded:
            low, high = recorded[INTERVALS[measure]]
            agrees = low <= new <= high
        elif measure in RELATIVE:
            agrees = abs(new - old) <= RELATIVE[measure] * abs(old)
        else:
            agrees = abs(new - old) <= POINTS[measure]
        out.append(Finding(variant, measure, old, new, "agrees" if agrees else "disagrees"))
    return out


@contextlib.contextmanager
def no_records() -> Iterator[None]:
    """No record read; inside it each model is measured once (a baseline is two variants' source)."""
    previous = os.environ.get("SHOWDOWN_NO_RECORDS")
    os.environ["SHOWDOWN_NO_RECORDS"] = "1"
    records.MEASURED_HERE.clear()
    try:
        yield
    finally:
        records.MEASURED_HERE.clear()
        os.environ.pop("SHOWDOWN_NO_RECORDS") if previous is None else os.environ.update(SHOWDOWN_NO_RECORDS=previous)


def verify_preset(preset: Preset, progress: Callable[[str], None] = log.info,
                  variants: tuple[str, ...] = ()) -> list[Finding]:
    """`variants`: only these (a rebuilt variant checked without the hour the others take); all when empty."""
    findings = []
    with no_records():
        for spec in preset.variants:
            if variants and spec.name not in variants:
                continue
            if spec.name in pruned_promise.trained_pruned(preset):  # trained, not built: its promise alone
                findings += verify_promise(preset, spec.name, progress)
                continue
            directory = preset.built_dir(spec.name)
            manifest = read_manifest(directory) if spec.source.kind == "built" else None
            if not manifest or not manifest.get("metrics") or not spec.built_from:
                if spec.name in variants:  # asked for by name: say it, never pass by measuring nothing
                    findings.append(Finding(spec.name, NOT_BUILT, None, None, "not verified"))
                continue
            recorded = manifest["metrics"]
            promise = gates.promise_of(spec.runtime, recorded)
            progress(f"{preset.name}/{spec.name}: measuring every gate here ({promise}), no record read")
            started = time.perf_counter()
            here = accuracy.measure(preset, directory, spec.name, resolve(preset, preset.variant(spec.built_from)), promise)
            findings += compare(spec.name, recorded, here)
            findings += [Finding(spec.name, miss, None, None, "gate missed here")
                         for miss in gates.failures(preset.task, spec.runtime, {**here, "promise": promise})]
            progress(f"{preset.name}/{spec.name}: done in {time.perf_counter() - started:.0f} s")
    return findings


def verify_promise(preset: Preset, variant: str, progress: Callable[[str], None]) -> list[Finding]:
    """A trained `pruned` against the baseline on validation, both measured here, beside the build's record of it."""
    progress(f"{preset.name}/{variant}: measuring its promise (pruned) against the baseline here, no record read")
    path, baseline = (resolve(preset, preset.variant(name)) for name in (variant, "baseline"))
    entry = promise_record(preset, variant, path, baseline)
    here = pruned_promise.measure(preset, variant)
    # without a record, what was measured here is still said (it had read "nothing to verify: build it first")
    unrecorded = [] if entry else [Finding(variant, f"{measure} (no promise record to compare with)", None, here[measure],
                                           "not verified") for measure in (*POINTS, *RELATIVE) if measure in here]
    return (compare(variant, entry["metrics"] if entry else {}, here) + unrecorded
            + [Finding(variant, miss, None, None, "gate missed here") for miss in here.get("gates_missed", [])])


def markdown(task: Task, preset: Preset, findings: list[Finding], variants: tuple[str, ...] = ()) -> str:
    machine = describe(cpu_threads())
    only = f", {', '.join(variants)} only" if variants else ""
    lines = [f"### Verify — {task} ({preset.name}{only}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"{machine['cpu']} ({machine['isa']}), {machine['threads']} threads; every gate measured here, no record "
             "read (`python -m optimize verify`).", "",
             "| variant | measure | record | here | verdict |", "|---|---|---|---|---|"]
    for f in findings:
        number = lambda v: "" if v is None else f"{v:.2f}"  # noqa: E731
        lines.append(f"| {f.variant} | {f.measure} | {number(f.recorded)} | {number(f.here)} | {f.verdict} |")
    return "\n".join(lines) + "\n"


def chosen_preset(task: Task) -> Preset:
    """The preset the app serves (SHOWDOWN_QA_PRESET / SHOWDOWN_GENERATION_PRESET, a user's `build --model` one
    included): verify had always measured the default's."""
    return presets_from_environment(hub=False)[task]


def run(tasks: list[Task], output: Path = REPORTS_DIR, variants: tuple[str, ...] = ()) -> int:
    """Exit status 1 when any measure disagrees with its record or any gate is missed here. With `variants` the
    report is written apart (verify-<task>-<variants>.md), so the whole-preset report stays whole."""
    failed = False
    for task in tasks:
        preset = chosen_preset(task)
        unknown = sorted(set(variants) - {spec.name for spec in preset.variants})
        if unknown:
            print(f"error: {preset.name} has no variant {', '.join(unknown)} "
                  f"(its variants: {', '.join(spec.name for spec in preset.variants)})", file=sys.stderr)
            return 2
        trained = pruned_promise.trained_pruned(preset)
        if ungated := [name for name in variants if not preset.variant(name).built_from and name not in trained]:
            # it had written a report of one "not verified" row
            print(f"error: {', '.join(ungated)} of {preset.name} has no gate of its own: it is the source the other "
                  "variants are measured against, and verify measures it as theirs", file=sys.stderr)
            return 2
        findings = verify_preset(preset, print, variants)
        unbuilt = [f.variant for f in findings if f.measure == NOT_BUILT]
        if not findings or unbuilt:  # no report of nothing (it had replaced the committed one), and never a pass
            print(f"error: {', '.join(unbuilt) or 'nothing'} of {preset.name} built with its gates measured here: "
                  f"build it first (python -m optimize build --task {task} --variant …); no report written",
                  file=sys.stderr)
            failed = True
            continue
        text = markdown(task, preset, findings, variants)
        output.mkdir(parents=True, exist_ok=True)
        stem = "-".join((f"verify-{task}" if preset.default else f"verify-{preset.name}", *variants))  # not the default's
        (output / f"{stem}.md").write_text(text)
        (output / f"{stem}.json").write_text(json.dumps([asdict(f) for f in findings], indent=1) + "\n")
        print(text)
        failed |= any(f.verdict != "agrees" for f in findings)
    return 1 if failed else 0
