"""Environment settings, read one way: a value the setting does not take is a ConfigError naming the variable and
what it takes. Why: `SHOWDOWN_DEVICE=CPU` still used the GPU, `SHOWDOWN_BUILD=false` still built and
`SHOWDOWN_THREADS=two` was a traceback; `app.py` reads every setting at start, so a typo stops it in one line."""
from __future__ import annotations

import math
import os

from models.errors import ConfigError

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def flag(variable: str, default: bool | None = None) -> bool | None:
    """1/true/yes/on or 0/false/no/off, any case; unset or empty: `default`."""
    value = os.environ.get(variable, "").strip().lower()
    if not value:
        return default
    if value in _TRUE + _FALSE:
        return value in _TRUE
    raise ConfigError(f"{variable}={os.environ[variable]!r}: use 1 or 0 (true/false, yes/no, on/off)")


def choice(variable: str, choices: tuple[str, ...], default: str) -> str:
    value = os.environ.get(variable, "").strip().lower() or default
    if value not in choices:
        raise ConfigError(f"{variable}={os.environ[variable]!r}: use one of {', '.join(choices)}")
    return value


def number(variable: str, default: float, kind: type = int, minimum: float | None = None,
           maximum: float | None = None):
    """A whole number (`kind` int) or any finite number, within `minimum` and `maximum`; unset or empty: `default`."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if (value is None or not math.isfinite(value) or (minimum is not None and value < minimum)
            or (maximum is not None and value > maximum)):
        wanted = "a whole number" if kind is int else "a number"
        bounds = (f" from {minimum:g} to {maximum:g}" if minimum is not None and maximum is not None
                  else f" ≥ {minimum:g}" if minimum is not None else f" ≤ {maximum:g}" if maximum is not None else "")
        raise ConfigError(f"{variable}={raw!r}: use {wanted}{bounds} (default {default:g})")
    return value


def server_port() -> int:
    """GRADIO_SERVER_PORT, checked before gradio is imported: gradio reads it with int() on import, so "", "abc" or
    "7860.0" had ended the start in its traceback. An empty value means the default, for gradio too."""
    if not os.environ.get("GRADIO_SERVER_PORT", "x").strip():
        del os.environ["GRADIO_SERVER_PORT"]
    return number("GRADIO_SERVER_PORT", 7860, int, minimum=1, maximum=65535)
