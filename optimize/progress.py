"""What a build shows in the terminal: one progress bar per stage, and nothing per tensor.

The app's first start builds every default variant in the background (minutes); its
terminal is what a visitor watches meanwhile, so it shows stages and their times, not the
quantizer's per-tensor lines.
"""
from __future__ import annotations

import contextlib
import io
import logging
import threading
from collections.abc import Callable, Iterator

from tqdm.auto import tqdm

log = logging.getLogger("optimize.progress")
BAR_FORMAT = "{desc} |{bar:12}| {elapsed}"


@contextlib.contextmanager
def stage(progress: Callable[[str], None], message: str) -> Iterator[None]:
    """One build stage: its message goes to `progress` (the app's status panel, or the log) and a
    tqdm bar in the terminal fills, with the stage's time, when the stage is done. On a terminal
    the time ticks meanwhile (an export or an evaluation of the defaults takes minutes); in a log
    file the bar is written when the stage starts and when it ends, not every second."""
    progress(message)
    with tqdm(total=1, desc=message, bar_format=BAR_FORMAT, leave=True) as bar:
        done = threading.Event()
        ticker = threading.Thread(target=_tick, args=(bar, done), daemon=True)
        if getattr(bar.fp, "isatty", lambda: False)():
            ticker.start()
        try:
            yield
            bar.update(1)
        finally:
            done.set()
            if ticker.is_alive():
                ticker.join()


def _tick(bar: tqdm, done: threading.Event) -> None:
    while not done.wait(1.0):
        bar.refresh()


def _not_quantizer_chatter(record: logging.LogRecord) -> bool:
    """onnxruntime's quantizers log through the root logger itself (`logging.info(...)`): a line per
    tensor ("Quantization parameters for tensor … not specified", "Ignore MatMul …") and advice the
    build does not take on purpose (pre-processing: the fused graph is quantized as it is)."""
    return record.levelno >= logging.ERROR or "onnxruntime/quantization" not in record.pathname.replace("\\", "/")


@contextlib.contextmanager
def quiet_quantizer() -> Iterator[None]:
    """Silence onnxruntime's quantizers at the source: their root-logger lines are filtered (a
    filter on the root logger only sees records logged on the root logger itself, so every other
    logger is untouched), their own loggers go to WARNING, and what they print goes to the debug log."""
    root, own = logging.getLogger(), logging.getLogger("onnxruntime.quantization")
    level, printed = own.level, io.StringIO()
    root.addFilter(_not_quantizer_chatter)
    own.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(printed):
            yield
    finally:
        root.removeFilter(_not_quantizer_chatter)
        own.setLevel(level)
        if printed.getvalue().strip():
            log.debug("quantizer output:\n%s", printed.getvalue())
