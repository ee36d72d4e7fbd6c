"""The Benchmarks tab's "Measure on this machine": the quick bench in a child process, one at a time, its progress
and last result kept for every visitor (a page opened later, or reloaded, shows them too)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from models.catalog import REPO_ROOT
from models.reports import bench_markdown

TIMEOUT_S = 30 * 60  # a bench that hangs is stopped: "measuring" forever had blocked every later click
# The bench's own steps (logger optimize.bench.run), without the log's time and name; its other output (tokenizer
# warnings, llama.cpp's absence) is kept for a failure's message only: as progress it read like faults
STEP = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ optimize\.bench\.run (.+)$")
QUICK_NOTE = ("*A quick run (few rounds) on this machine while it serves visitors: a timing that overlapped their "
              "requests reads slower. The ✅ / ❌ marks are the full bench's targets.*")


def step(line: str) -> str | None:
    """The progress a line of the bench's output shows a visitor, or None."""
    found = STEP.match(line.strip())
    return found.group(1) if found else None


def stopped(code: int, tail: list[str]) -> str:
    """Why the bench ended early: its exit status or signal first (the last lines alone had blamed a warning)."""
    how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
    return f"the bench stopped ({how}); its last lines: " + " / ".join(tail[-3:])


def quick_bench(progress: Callable[[str], None]) -> str:
    """`python -m optimize bench --quick --no-app` in a child process (its models stay out of the app's memory),
    which stops when the app does (it had run on, orphaned). Returns its table, labelled."""
    with tempfile.TemporaryDirectory(prefix="showdown-bench-") as output:
        command = [sys.executable, "-m", "optimize", "bench", "--quick", "--no-app", "--output", output,
                   "--parent-pid", str(os.getpid())]
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace")  # a stray byte in its output is no reason to stop reading it
        timed_out = threading.Event()
        timer = threading.Timer(TIMEOUT_S, lambda: (timed_out.set(), process.kill()))
        timer.start()
        tail: list[str] = []
        try:
            for line in process.stdout:
                if line.strip():
                    tail = (tail + [line.strip()])[-20:]
                    if shown := step(line):
                        progress(shown)
            code = process.wait()
        finally:  # whatever stopped the reading, no bench is left running beside the next one
            timer.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
        if timed_out.is_set():
            raise RuntimeError(f"the bench took longer than {TIMEOUT_S / 60:.0f} minutes and was stopped")
        if code != 0:
            raise RuntimeError(stopped(code, tail))
        return f"{bench_markdown(Path(output))}\n{QUICK_NOTE}\n"


@dataclass
class MeasureHere:
    """One measurement at a time, in a background thread. `measure(progress)` returns a labelled Markdown table; the
    tests pass a tiny one."""

    measure: Callable[[Callable[[str], None]], str] = quick_bench
    result: str = ""
    progress: str = ""
    running: bool = False
    _started: float = 0.0
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def start(self) -> bool:
        """False when a measurement is already running (it is not started twice)."""
        with self._changed:
            if self.running:
                return False
            self.running, self.progress, self._started = True, "starting", time.monotonic()
        threading.Thread(target=self._run, name="measure-here", daemon=True).start()
        return True

    def _run(self) -> None:
        try:
            result = self.measure(self._report)
        except Exception as error:  # noqa: BLE001 - shown in the tab; the app keeps serving
            result = f"⚠️ The measurement failed: {type(error).__name__}: {error}"
        with self._changed:
            self.result, self.running = result, False
            self._changed.notify_all()

    def _report(self, message: str) -> None:
        with self._changed:
            self.progress = message
            self._changed.notify_all()

    def wait(self, timeout_s: float) -> None:
        """Until the progress changes, the run ends, or `timeout_s` passes."""
        with self._changed:
            self._changed.wait(timeout_s)

    def status(self) -> str:
        if self.running:
            return f"⏳ Measuring on this machine ({time.monotonic() - self._started:.0f} s): {self.progress}"
        return self.result or "Not measured on this machine yet."
