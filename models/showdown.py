"""The live side-by-side: which variants are ready, loading them once (warmed up), answering
with each, and what is missing or stale, for the background builder (optimize/first_start.py).

A variant is served only if its files match its manifest and it loads: otherwise it is
`unavailable` with the reason and the fix, calls to it raise VariantUnavailable with that
message, and the other variants keep serving."""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from models import generation, qa
from models.catalog import (REPO_ROOT, VARIANTS, Preset, Task, all_presets, chosen_variants, preset,
                            presets_from_environment)
from models.errors import InputError, VariantUnavailable, fault_message
from models.footprint import resident_after_release, warm_runtimes
from models.recorded import recorded_accuracy
from models.manifest import read_manifest, rejected_recipes, size_bytes
from models.on_disk import built_description, corrupt, fix, locate, manifest_stamp, servable, stale
from models.reports import accuracy_text
from models.runners import Runner, load_runner
from models.sources import resolve
from models.timing import median_call, with_speedups

T = TypeVar("T")

log = logging.getLogger("showdown")
WARMUP_CONTEXT = ("The first little pig was very lazy. He didn't want to work at all and he built his house out of "
                  "straw. The second little pig worked a little bit harder but he was somewhat lazy too and he "
                  "built his house out of sticks.")
SEED_CONTEXT_LONG = WARMUP_CONTEXT + (" The third little pig worked very hard all day and built his house with "
                                      "bricks. Then, they sang and danced and played together the rest of the day.")


# What a reported time is: the call right after an untimed one on the same input (the app's clicks),
# or a lone call after whatever idle time preceded it (the API's default).
TIMED_AFTER_WARM_UP = "after one untimed warm-up call"
TIMED_ALONE = "one call, no warm-up"
CLICK_CALLS = 3  # a click's time per variant: the median of this many calls, in rotating order
WARM_UP_TOKENS = 4  # a generation warm-up: the prompt's prefill and three decoding steps


class _OnModelThread:
    """A runner whose `generate` runs on the showdown's model thread; everything else is the runner's."""

    def __init__(self, runner: Runner, model_thread: ThreadPoolExecutor) -> None:
        self._runner, self._model_thread = runner, model_thread

    def __getattr__(self, name: str):
        return getattr(self._runner, name)

    def generate(self, *args, **kwargs):
        return self._model_thread.submit(self._runner.generate, *args, **kwargs).result()


@dataclass
class Showdown:
    presets: dict[str, Preset]  # task -> preset
    _runners: dict[tuple[str, str], Runner] = field(default_factory=dict)
    _building: dict[tuple[str, str], str] = field(default_factory=dict)
    _failed: dict[tuple[str, str], str] = field(default_factory=dict)  # builds that failed
    _load_failed: dict[tuple[str, str], str] = field(default_factory=dict)  # loads that failed, with the fix
    _memory: dict[tuple[str, str], int] = field(default_factory=dict)  # resident bytes each load added, measured
    _loaded_from: dict[tuple[str, str], int | None] = field(default_factory=dict)  # its manifest's mtime when loaded
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _run_lock: threading.Lock = field(default_factory=threading.Lock)
    _model_thread: ThreadPoolExecutor = field(  # one long-lived thread runs every model: see answer()
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="showdown-model"))
    _calls: Iterator[int] = field(default_factory=itertools.count)  # shared by `using()`'s copies, as the locks

    @classmethod
    def from_environment(cls) -> Showdown:
        """The presets the environment names (models/catalog.presets_from_environment)."""
        return cls(presets=presets_from_environment())

    def preset(self, task: Task) -> Preset:
        if task not in self.presets:
            raise InputError(f"Unknown task '{task}'; choose qa or generation.")
        return self.presets[task]

    def _key(self, task: Task, variant: str) -> tuple[str, str]:
        """Loaded runners, builds and faults are per preset: two presets of one task never share them."""
        return self.preset(task).name, variant

    def choices(self, task: Task) -> list[str]:
        """The presets a visitor can pick for `task`: the one shown first, then every other preset of
        the task with a variant built here (the offline default, then `optimize build --model` ones)."""
        shown = self.preset(task)
        others = [p for p in all_presets() if p.task == task and p.name != shown.name
                  and any((p.built_dir(v.name) / "manifest.json").exists() for v in p.variants if v.source.kind == "built")]
        return [shown.name, *(p.name for p in sorted(others, key=lambda p: not p.default))]

    def using(self, task: Task, name: str | None) -> Showdown:
        """This showdown with preset `name` shown for `task`: the same model thread, locks and loaded
        runners, so switching presets per request costs nothing once a variant is loaded."""
        if not name or name == self.preset(task).name:
            return self
        if name not in self.choices(task):
            raise InputError(f"Unknown or unbuilt {task} preset '{name}'; choose one of {', '.join(self.choices(task))}.")
        return dataclasses.replace(self, presets={**self.presets, task: preset(name)})

    # --- status -------------------------------------------------------------------------------
    def accuracy(self, task: Task, variant: str, path: Path | None) -> dict:
        return recorded_accuracy(self.preset(task), variant, path, lambda name: locate(self.preset(task), name))

    def variant_status(self, task: Task, variant: str) -> dict:
        key = self._key(task, variant)
        spec = self.preset(task).variant(variant)
        with self._lock:
            building, failed, load_failed = self._building.get(key), self._failed.get(key), self._load_failed.get(key)
        path = None if building else locate(self.preset(task), variant)
        fault = (corrupt(self.preset(task), variant, path) or load_failed) if path is not None else None
        if building:
            status, detail = "building", building
        elif fault:  # and why its rebuild failed, if it did
            status, detail = "unavailable", "; ".join(filter(None, [fault, failed]))
        elif path is not None:  # an earlier build's files: a failed rebuild is said beside them, not hidden
            status = "ready"
            detail = "; ".join(filter(None, [built_description(self.preset(task), variant, path),
                                             failed and f"served from an earlier build: {failed}"]))
        elif failed:
            status, detail = "unavailable", failed
        else:
            status, detail = "unavailable", spec.how_to_build or f"weights not found ({spec.source.kind} {spec.source.location})"
        accuracy = self.accuracy(task, variant, path)
        if accuracy.get("gates_missed"):
            detail += "; missed accuracy gate: " + "; ".join(accuracy["gates_missed"])
        return {
            "task": task, "preset": self.preset(task).name, "variant": variant, "runtime": spec.runtime,
            "status": status, "detail": detail,
            "folder": str(path) if path else None, "size_bytes": size_bytes(path) if path else 0,
            "memory_bytes": self._memory.get(key),  # None until loaded here
            "accuracy": accuracy,
        }

    def variants(self) -> list[dict]:
        return [self.variant_status(task, v.name) for task in self.presets for v in self.preset(task).variants]

    def summary(self) -> list[str]:
        """One line per variant: ready with its size, accuracy and the recipes rejected on the way, or why not."""
        lines = []
        for status in self.variants():
            head = f"{status['task']}/{status['variant']}: {status['status']}"
            if status["status"] != "ready":
                lines.append(f"{head}: {status['detail']}")
                continue
            rejected = rejected_recipes(read_manifest(Path(status["folder"])) or {})
            missed = [f"missed accuracy gate: {miss}" for miss in status["accuracy"].get("gates_missed", [])]
            lines.append("; ".join([f"{head}, {status['size_bytes'] / 1e6:,.1f} MB, accuracy "
                                    f"{accuracy_text(status['accuracy']).replace('—', 'not measured')}", *missed, *rejected]))
        return lines

    # --- running ------------------------------------------------------------------------------
    def runner(self, task: Task, variant: str) -> Runner:
        """Load once and warm up; later calls reuse the loaded runner."""
        if variant not in VARIANTS:
            raise InputError(f"Unknown variant '{variant}'; choose one of {', '.join(VARIANTS)}.")
        key = self._key(task, variant)
        with self._lock:
            if key in self._runners:
                if manifest_stamp(self.preset(task), variant) == self._loaded_from.get(key):
                    return self._runners[key]
                log.info("%s/%s was rebuilt by another process: loading its new files", task, variant)
                self.mark_built(task, variant)  # not the old model under the new build's figures
            if key in self._building:
                raise VariantUnavailable(f"{variant} is still building: {self._building[key]}")
            p = self.preset(task)
            spec = p.variant(variant)
            located = locate(p, variant)
            if located is not None and (wrong := corrupt(p, variant, located)):
                raise VariantUnavailable(f"{variant} is unavailable: {wrong}")
            path = resolve(p, spec)
            with self._turn():  # model-thread work: never inside another visitor's timed call, nor its memory
                self.on_model_thread(warm_runtimes, task, path)  # once: not the first variant's memory (footprint.py)
                before = resident_after_release()
                try:  # loaded on the model thread: ONNX Runtime's and OpenMP's worker threads are its children
                    runner = self.on_model_thread(load_runner, task, variant, spec.runtime, path)
                    self._warm_up(runner)
                except Exception as error:  # a model that does not load or run is unavailable, not a crash
                    expected = isinstance(error, VariantUnavailable)  # load_runner's: the reason is in the message
                    reason = str(error) if expected else f"it fails to run ({type(error).__name__}: {error})"
                    self._load_failed[key] = f"{reason}; {fix(p, variant)}"
                    log.warning("%s/%s is unavailable: %s", task, variant, self._load_failed[key], exc_info=not expected)
                    raise VariantUnavailable(f"{variant} is unavailable: {self._load_failed[key]}") from error
                after = resident_after_release()
            self._load_failed.pop(key, None)
            if before is not None and after is not None:  # weights read, sessions and arenas warmed: its footprint
                self._memory[key] = max(after - before, 0)
            self._runners[key] = runner
            self._loaded_from[key] = manifest_stamp(p, variant)
            return runner

    def on_model_thread(self, call: Callable[..., T], *args, **kwargs) -> T:
        """`call` run on the thread that runs every model, as the app runs them: a timing harness (report, bench)
        times there too. PyTorch on a second thread gets a second OpenMP team, and its variants ran slower beside
        the first one (docs/measurements.md, "on_model_thread"). Not from inside a call already on that thread."""
        return self._model_thread.submit(call, *args, **kwargs).result()

    def _warm_up(self, runner: Runner) -> None:
        """Twice, on the model thread that will run it."""
        for _ in range(2):
            if runner.task == "qa":
                self.on_model_thread(qa.answer, runner, "Who worked a little bit harder?", WARMUP_CONTEXT)
            else:
                generation.generate(_OnModelThread(runner, self._model_thread), "Hello!", 4)

    def serve_models_first(self, nice: int, switch_interval_s: float | None = None) -> None:
        """Keep the compute being timed from being preempted by the server's other work on 2 cores.

        - Every thread started after this call (the web server's, the background builder's) runs
          `nice` more than the model thread. Linux nice values are per thread and new threads
          inherit their creator's: the model thread is started first at the process's priority, and
          its ONNX Runtime / OpenMP workers are created by it (models load on it). Lowering one's
          own priority needs no privilege.
        - `switch_interval_s`: how long a thread may keep the GIL when another asks for it. A
          session run releases the GIL; with CPython's default 5 ms, the model thread could wait
          that long to get it back from a server thread after every run.
        With 4 HTTP clients both together kept compute closest to a single client's, either alone did
        not (experiments/app-timing/measure_concurrency.py; figures: docs/measurements.md)."""
        self.on_model_thread(lambda: None)  # the model thread exists before the server's
        if switch_interval_s:
            sys.setswitchinterval(switch_interval_s)
        if nice and hasattr(os, "setpriority"):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + nice)

    def run_order(self, variants: list[str]) -> list[str]:
        """Rotate the order on every call so that no variant always runs first (or last)."""
        with self._lock:
            shift = next(self._calls) % max(len(variants), 1)
        return variants[shift:] + variants[:shift]

    @contextlib.contextmanager
    def _turn(self) -> Iterator[float]:
        """One model computes at a time, however many visitors: a model sharing 2 cores with
        another request's model would report both computations as its own. Yields the
        milliseconds this request waited for its turn, reported apart from its compute time."""
        asked = time.perf_counter()
        with self._run_lock:
            yield 1e3 * (time.perf_counter() - asked)

    def answer(self, context: str, question: str, variant: str, handle_impossible_answer: bool = False,
               warm_up: bool = False) -> dict:
        """The `/qa` response; `latency_ms.wait` (time queued behind other visitors) is not in `total`.

        `warm_up`: one untimed call on the same input first, inside the same turn. A visitor's click
        follows idle time, after which every runtime's first call is slower (threads asleep, caches
        cold: up to twice as slow after a second idle), so a lone timed
        call measures how long the variant idled, not the variant; the warm-up makes a click's times
        comparable across variants and with the bench's warm loops (`timing` says which was taken).

        The forward runs on one long-lived thread rather than on whichever worker thread the web
        server picked: a thread new to PyTorch builds its OpenMP team and caches first (pruned QA at
        tokens under load: over twenty times slower on a fresh thread,
        experiments/app-timing/measure_inflation.py)."""
        qa.validate(question, context)
        runner = self.runner("qa", variant)
        call = lambda: qa.answer(runner, question, context, handle_impossible_answer)  # noqa: E731
        with self._turn() as wait_ms:
            if warm_up:
                self.on_model_thread(call)
            result = self.on_model_thread(call)
        result["latency_ms"]["wait"] = wait_ms
        result["timing"] = TIMED_AFTER_WARM_UP if warm_up else TIMED_ALONE
        result["device"] = runner.device
        return result

    def compare(self, context: str, question: str, variants: list[str], handle_impossible_answer: bool = False
                ) -> dict[str, dict]:
        """A QA click: each variant answers CLICK_CALLS times in rotating rounds (the first call after an untimed
        one) and shows its median call, the range and its speedup; one call wandered (docs/measurements.md)."""
        qa.validate(question, context)
        chosen = self.run_order(chosen_variants(variants))
        calls: dict[str, list[dict]] = {v: [] for v in chosen}
        errors: dict[str, dict] = {}
        for round_index in range(CLICK_CALLS):
            for variant in chosen[round_index % len(chosen):] + chosen[:round_index % len(chosen)]:
                try:
                    if variant not in errors:
                        calls[variant].append(self.answer(context, question, variant, handle_impossible_answer,
                                                          warm_up=round_index == 0))
                except (InputError, VariantUnavailable) as error:  # not in this preset or not ready: in its column
                    errors[variant] = {"error": str(error)}
                except Exception as error:  # noqa: BLE001 - a fault of ours in one variant: the others still answer
                    log.exception("qa/%s failed", variant)
                    errors[variant] = {"error": fault_message(error)}
        results = {v: errors.get(v) or median_call(calls[v], f"the first {TIMED_AFTER_WARM_UP}") for v in chosen}
        return with_speedups({v: results[v] for v in VARIANTS if v in results})

    def stream(self, prompt: str, variant: str, max_new_tokens: int, warm_up: bool = False) -> Iterator[generation.Update]:
        """Generation updates; the last one's `latency_ms.wait` says how long it queued. The
        decoding loop runs on the model thread too (generation.stream would start a new thread
        for it on every call). `warm_up`: as for `answer`, a short untimed generation of the same
        prompt first (its prefill and a few decoding steps)."""
        generation.validate(prompt, max_new_tokens)
        runner = _OnModelThread(self.runner("generation", variant), self._model_thread)
        with self._turn() as wait_ms, contextlib.closing(generation.stream(runner, prompt, max_new_tokens)) as updates:
            if warm_up:
                generation.generate(runner, prompt, min(max_new_tokens, WARM_UP_TOKENS))
            for update in updates:  # closed inside the turn: a visitor who leaves stops the model before the next turn
                if update.done:
                    update.result["latency_ms"]["wait"] = wait_ms
                    update.result["timing"] = TIMED_AFTER_WARM_UP if warm_up else TIMED_ALONE
                yield update

    def stream_each(self, prompt: str, variants: list[str], max_new_tokens: int, warm_up: bool = False
                    ) -> Iterator[tuple[str, generation.Update | Exception]]:
        """A generation click: each variant's updates in turn, a variant's error in its place (the others go on). One
        call, so that a cluster serves a whole click from one replica and its speedups compare like with like."""
        for variant in variants:
            try:
                with contextlib.closing(self.stream(prompt, variant, max_new_tokens, warm_up)) as updates:
                    for update in updates:
                        yield variant, update
            except (InputError, VariantUnavailable) as error:  # the visitor's input, or a variant not ready
                yield variant, error
            except Exception as error:  # noqa: BLE001 - a fault of ours: logged here, said in its column
                log.exception("generation/%s failed", variant)
                yield variant, error

    def generate(self, prompt: str, variant: str, max_new_tokens: int, warm_up: bool = False) -> dict:
        *_, last = self.stream(prompt, variant, max_new_tokens, warm_up)
        return last.result

    # --- building -----------------------------------------------------------------------------
    def missing_builds(self) -> list[tuple[Task, str]]:
        """What this machine can build now: package conversions, the pushed repos of a preset that
        fetches on start, and ONNX variants whose source is present or will be built first (not
        pruning or training, not a Hub preset's models: those are fetched when first used)."""
        todo: list[tuple[Task, str]] = []
        for task, p in self.presets.items():
            for spec in p.variants:
                if servable(p, spec.name):
                    if not (why := stale(p, spec.name)):
                        continue
                    log.info("%s/%s is rebuilt: %s", task, spec.name, why)
                if spec.source.kind == "package" or (spec.source.kind == "hub" and p.fetch_on_start):
                    todo.append((task, spec.name))
                elif spec.source.kind == "built" and spec.recipe_dir and (REPO_ROOT / spec.recipe_dir).exists():
                    todo.append((task, spec.name))
                elif spec.source.kind == "built" and spec.runtime == "onnxruntime" and spec.built_from:
                    source = p.variant(spec.built_from)
                    if servable(p, source.name) or (task, source.name) in todo:
                        todo.append((task, spec.name))
        return todo

    def mark_building(self, task: Task, variant: str, message: str) -> None:
        """What the variant's build is doing now: shown in its status, and calls to it say so."""
        with self._lock:
            self._building[self._key(task, variant)] = message

    def mark_build_failed(self, task: Task, variant: str, message: str) -> None:
        with self._lock:
            self._failed[self._key(task, variant)] = message

    def mark_built(self, task: Task, variant: str) -> None:
        """A rebuilt variant is served from its new files: forget its runner and earlier faults."""
        with self._lock:
            for state in (self._runners, self._failed, self._load_failed, self._memory, self._loaded_from):
                state.pop(self._key(task, variant), None)

    def mark_build_done(self, task: Task, variant: str) -> None:
        with self._lock:
            self._building.pop(self._key(task, variant), None)
