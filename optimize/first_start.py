"""Build what a showdown is missing, in the background of a running app: the orchestrator above
the runtime (`models/`, which answers and reports status) and the build (`optimize/`, which makes
variants). The runtime never imports the build; the app starts this beside it."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from models.errors import ConfigError, InputError, VariantUnavailable
from models.showdown import Showdown
from models.sources import resolve
from optimize.build import build_assembled, build_onnx
from optimize.evaluate.gates import GateFailed
from optimize.progress import stage

log = logging.getLogger(__name__)


def build_missing(showdown: Showdown, progress: Callable[[str], None] = log.debug, evaluate: bool = True) -> None:
    """Build what is missing, corrupt or stale (built from a source since changed), one after the other: each
    stage's message goes to the UI's status and to `progress` (the terminal shows a progress bar per stage instead),
    then one summary line per variant is logged. A failed build leaves a variant with no earlier files unavailable
    with the reason (one with earlier files is served from them, the failure beside it); the others keep building
    and serving. `evaluate`: measure accuracy against the gates
    (needs the SQuAD data for QA)."""
    todo = showdown.missing_builds()
    for task, variant in todo:
        showdown.mark_building(task, variant, "queued")
    for task, variant in todo:
        def report(message: str, task=task, variant=variant) -> None:
            showdown.mark_building(task, variant, message)
            progress(message)

        try:
            preset = showdown.preset(task)
            spec = preset.variant(variant)
            if spec.source.kind == "hub":
                report(f"{preset.name}/{variant}: fetching {spec.source.location} from the Hub")
                resolve(preset, spec)
            elif spec.recipe_dir:
                build_assembled(preset, variant, progress=report, evaluate=evaluate)
            elif spec.runtime == "onnxruntime":
                build_onnx(preset, variant, progress=report, evaluate=evaluate)
            else:
                with stage(report, f"{preset.name}/{variant}: converting {Path(spec.source.location).name} "
                                   "(first start only)"):
                    resolve(preset, spec)
        except Exception as error:  # keep serving: the failure is reported with the variant
            expected = isinstance(error, (GateFailed, VariantUnavailable, InputError, ConfigError))  # said in a line
            log.warning("building %s/%s failed%s", task, variant, f": {error}" if expected else "", exc_info=not expected)
            showdown.mark_build_failed(task, variant, f"build failed: {type(error).__name__}: {error}")
        else:
            showdown.mark_built(task, variant)
        finally:
            showdown.mark_build_done(task, variant)
    for line in showdown.summary():
        log.info(line)


def start_background_build(showdown: Showdown) -> threading.Thread:
    thread = threading.Thread(target=build_missing, args=(showdown,), name="build-missing", daemon=True)
    thread.start()
    return thread
