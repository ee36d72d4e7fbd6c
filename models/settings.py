"""Environment settings, read one way: a value the setting does not take is a ConfigError naming the variable and
what it takes. Why: `SHOWDOWN_DEVICE=CPU` still used the GPU, `SHOWDOWN_BUILD=false` still built and
`SHOWDOWN_THREADS=two` was a traceback; `app.py` reads every setting at start, so a typo stops it in one line."""
from __future__ import annotations

import errno
import math
import os
import socket
from pathlib import Path

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


def cpu_threads() -> int:
    """SHOWDOWN_THREADS, by default the CPUs this process may use (`usable_cpus`)."""
    return number("SHOWDOWN_THREADS", usable_cpus(), int, minimum=1)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (a cpuset, `taskset`), at most a cgroup's CPU quota (a container's
    or a Space's `--cpus`). os.cpu_count() counts the host's, and more threads than cores slowed every model down."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        count = os.cpu_count() or 1
    for quota_file, period_file in (("cpu.max", None), ("cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us")):  # v2, v1
        try:
            quota, *period = Path("/sys/fs/cgroup", quota_file).read_text().split()
            period = period or Path("/sys/fs/cgroup", period_file).read_text().split()
            if quota not in ("max", "-1"):
                return max(1, min(count, int(quota) // int(period[0])))
        except (OSError, ValueError, IndexError, TypeError):
            continue
    return count


def prompt_lookup() -> bool | None:
    """SHOWDOWN_PROMPT_LOOKUP=1 / =0: exact prompt lookup on / off for every ONNX decoder; unset (None): each
    variant decodes as its build saved (models/decoding.DecodingConfig)."""
    return flag("SHOWDOWN_PROMPT_LOOKUP")


def wanted_device() -> str:
    """SHOWDOWN_DEVICE: auto (the GPU when there is one), cpu, or cuda."""
    return choice("SHOWDOWN_DEVICE", ("auto", "cpu", "cuda"), "auto")


def serving() -> tuple[int, float]:
    """(nice, GIL switch interval in s): SHOWDOWN_SERVING_NICE (10) and SHOWDOWN_SWITCH_INTERVAL (0.0002), checked.
    The server's own threads (HTTP, queue, event handlers, the background builder) run this much nicer than the
    model thread, and a thread holds the GIL at most this long when another asks: on 2 cores, taking in the next
    visitor's request otherwise steals cycles from the compute being timed (Showdown.serve_models_first; 0 turns
    either off)."""
    return (number("SHOWDOWN_SERVING_NICE", 10, int, minimum=0, maximum=19),  # the kernel's range
            number("SHOWDOWN_SWITCH_INTERVAL", 0.0002, float, minimum=0, maximum=1.0))


def check_listen(host: str, port: int) -> None:
    """Whether a server could listen there now (a closed app's lingering connections do not count, as for uvicorn),
    said before models load and builds start, not as gradio's trace after; a host that is no address is not a busy
    port."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} is in use (another `python app.py`?): stop it, or set "
                                  "GRADIO_SERVER_PORT to a free port") from None
            raise ConfigError(f"cannot listen on {host}:{port} ({error.strerror or error}): check GRADIO_SERVER_NAME "
                              "(default 0.0.0.0)") from None


SHARED_DATA_FOLDERS = ("squad-v2-dev", "squad-v2-dev-more", "squad-v2-train-head", "squad-v1.1-train")


def shared_data(check: bool = True) -> Path:
    """SHOWDOWN_SHARED_DATA, or ../shared/data beside the checkout: the SQuAD files the builds' gates read. `check`
    (where a command or the app starts): a folder named that holds none of the data's folders is an error, since it
    had silently served every variant as not measured; the default may be absent. Modules that import the path
    resolve it without checking, so that importing them never fails."""
    value = os.environ.get("SHOWDOWN_SHARED_DATA", "").strip()
    if not value:
        return Path(__file__).resolve().parents[2] / "shared" / "data"
    if check and not any((Path(value) / name).is_dir() for name in SHARED_DATA_FOLDERS):
        raise ConfigError(f"SHOWDOWN_SHARED_DATA={value!r} holds none of {', '.join(SHARED_DATA_FOLDERS)}: point it "
                          "at the shared data folder")
    return Path(value)


def check_model_settings() -> None:
    """Every setting the models and the builds read, read once where the app, a command or a Ray deployment starts
    (each is read again where it is used): a typo stops the start in one line, before any work."""
    cpu_threads(), prompt_lookup(), wanted_device(), shared_data()
    flag("SHOWDOWN_NO_RECORDS", False), flag("SHOWDOWN_CUDA_GRAPH", True)
