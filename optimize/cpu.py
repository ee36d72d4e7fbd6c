"""What this CPU can do, read once from /proc/cpuinfo: recipes pick kernels by it."""
from __future__ import annotations

import functools
from pathlib import Path


@functools.cache
def cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return frozenset(line.split(":", 1)[-1].split())


def has_bf16() -> bool:
    """avx512_bf16 / amx_bf16: without them bf16 autocast is slower than fp32."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def has_vnni() -> bool:
    """Without VNNI, u8×s8 products can saturate: ONNX Runtime's advice is reduce_range (7-bit weights)."""
    return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & cpu_flags())


def isa() -> str:
    """The CPU class INT8 kernels (and so speedups and quantized rungs) depend on: avx512 / avx2, with -vnni."""
    return ("avx512" if "avx512f" in cpu_flags() else "avx2" if "avx2" in cpu_flags() else "other") + (
        "-vnni" if has_vnni() else "")
