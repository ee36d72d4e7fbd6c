"""Which memory allocator a training process runs on, and the one line that tells a user how to run hours of it well.

A training step allocates buffers of tens of MB whose sizes change with every batch's window length. glibc's malloc
keeps the fragments, so a long run's memory grows and its steps slow down. jemalloc keeps memory flat but, by default,
gives every large buffer (over its `oversize_threshold`) back to the kernel as soon as it is freed, so each step
faults its pages in again and the kernel takes a large share of the cores. Preloaded with purging off, jemalloc keeps
both memory and speed steady (docs/training.md has the measurements). The allocator is chosen before the process
starts, so this only says what to do; it changes nothing.
"""
from __future__ import annotations

import os
from pathlib import Path

STEADY_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"  # jemalloc keeps freed pages for the next step instead of purging
KNOWN_PATHS = ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
               "/usr/lib64/libjemalloc.so.2", "/usr/lib/libjemalloc.so.2")


def _mapped_libraries() -> str | None:
    """The process's memory map (Linux only): the libraries it runs, the preloaded allocator among them."""
    try:
        return Path("/proc/self/maps").read_text()
    except OSError:
        return None


def jemalloc_library() -> str | None:
    """Where this machine's jemalloc is, if it has one at a usual place."""
    return next((path for path in KNOWN_PATHS if Path(path).exists()), None)


def advice() -> str | None:
    """What to change for a long training run, or None when the process already runs jemalloc without purging (or
    is not on Linux, where this was not measured)."""
    maps = _mapped_libraries()
    if maps is None:
        return None
    steady_env = f"MALLOC_CONF={STEADY_CONF}"
    if "libjemalloc" in maps:
        if all(part in os.environ.get("MALLOC_CONF", "") for part in STEADY_CONF.split(",")):
            return None
        return (f"jemalloc purges large freed buffers at once, so every step faults them in again: "
                f"set {steady_env} for a run of hours")
    library = jemalloc_library()
    preload = f"LD_PRELOAD={library}" if library else "LD_PRELOAD=<libjemalloc.so.2> (Debian: apt-get install libjemalloc2)"
    return (f"glibc's malloc keeps the fragments of changing batch shapes, so memory grows and steps slow down over "
            f"hours: for a long run, start the command with {preload} {steady_env} (docs/training.md)")


def log_advice(log) -> None:
    """Once at the start of a training loop, where the user of a long run looks."""
    note = advice()
    if note:
        log.info("memory allocator: %s", note)
