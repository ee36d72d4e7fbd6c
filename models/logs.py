"""Terminal logging for the app and `python -m optimize`: our loggers at INFO, everyone else's at
WARNING. Why: a first start builds for minutes and its terminal is what a visitor watches;
at INFO, onnxruntime's graph optimizer and quantizer, httpx, optimum and transformers wrote
hundreds of lines per build (a line per tensor), which buried the progress bars and the summaries."""
from __future__ import annotations

import logging
import sys
import warnings

OWN_LOGGERS = ("app", "showdown", "models", "optimize")
THIRD_PARTY = ("httpx", "httpcore", "urllib3", "huggingface_hub", "gradio", "onnxruntime", "optimum", "transformers")


def configure_logging(level: int = logging.INFO) -> None:
    """Root (and so every library logger without a level of its own) at WARNING, ours at `level`;
    deprecation notices of the libraries we call are not the visitor's business."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout,
                        force=True)
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(level)
    for category in (DeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category)
