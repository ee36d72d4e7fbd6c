"""The machine behind every number: what this CPU can do (read once from /proc/cpuinfo; recipes
pick kernels by it), its name, threads and the runtime versions. A leaf: the app shows it and the
build's reports and records key on it."""
from __future__ import annotations

import functools
import os
import platform
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


@functools.cache
def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measured_stamp() -> str:
    """"<date>, <CPU> (<ISA>)": what every record says of when and where it was measured."""
    from datetime import date

    return f"{date.today()}, {cpu_name()} ({isa()})"


def int8_features() -> str:
    """The INT8 instructions ONNX Runtime's quantized kernels use, in words."""
    flags = cpu_flags()
    found = [name for name, flag in (("AVX-512 VNNI", "avx512_vnni"), ("AVX-VNNI", "avx_vnni"), ("AMX-INT8", "amx_int8"))
             if flag in flags]
    return ", ".join(found) or ("AVX-512 without VNNI" if "avx512f" in flags else "AVX2 without VNNI" if "avx2" in flags
                                else "no AVX2")


def describe(threads: int) -> dict:
    """What the app and every report name: the CPU, its class, its INT8 instructions, cores and threads."""
    from models.manifest import versions

    return {"cpu": cpu_name(), "isa": isa(), "int8": int8_features(), "cores": os.cpu_count(), "threads": threads,
            "versions": versions()}


def slower_here(reference_isa: str) -> str:
    """One line on why INT8 variants may be slower here than on the class a report was measured on."""
    here = isa()
    if here == reference_isa or not reference_isa:
        return ""
    if reference_isa.endswith("-vnni") and not has_vnni():
        return (f"this CPU ({here}) has no VNNI: INT8 kernels fall back to slower instructions (and 7-bit weights), so "
                f"the INT8 variants gain less here than on the reference {reference_isa} machine")
    if reference_isa.startswith("avx512") and not here.startswith("avx512"):
        return (f"this CPU ({here}) has no AVX-512: ONNX Runtime's kernels run at half the vector width of the "
                f"reference {reference_isa} machine")
    return f"this CPU's class ({here}) differs from the reference ({reference_isa}): speedups may differ"


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux); a variant's footprint is its growth across its load."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")
