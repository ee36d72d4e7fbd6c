"""Zero the GPU code for every architecture but one in a CUDA library's fat binaries, so that it packs small.

onnxruntime-gpu's CUDA provider (284 MB) is mostly `.nv_fatbin` (219 MB): 609 fat binaries, each holding
cubins for sm_75, 80, 86, 89, 90 and 120. An H100/H200 loads only the sm_90 cubins (77 MB), so the
others are overwritten with zeros in place: the file keeps its size and every header, the driver still
finds and picks the sm_90 entries, and the zeros compress to nothing. A device trip then carries ~1/3.

    python experiments/gpu/slim_fatbin.py LIBRARY [--keep 90]
"""
from __future__ import annotations

import argparse
import struct
import subprocess
from collections import Counter

MAGIC = 0xBA55ED50


def fatbin_section(path: str) -> tuple[int, int]:
    """File offset and size of `.nv_fatbin` (readelf, as binutils prints it)."""
    for line in subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True, check=True).stdout.splitlines():
        if ".nv_fatbin" in line:
            fields = line.split("]", 1)[1].split()
            return int(fields[3], 16), int(fields[4], 16)
    raise SystemExit(f"{path} has no .nv_fatbin section")


def slim(path: str, keep: int) -> Counter:
    offset, size = fatbin_section(path)
    with open(path, "r+b") as handle:
        handle.seek(offset)
        section = bytearray(handle.read(size))
        zeroed: Counter = Counter()
        position = 0
        while position + 16 <= len(section):
            magic, _, header_size, fat_size = struct.unpack_from("<IHHQ", section, position)
            if magic != MAGIC:
                position += 8  # fat binaries are 8-byte aligned
                continue
            entry, end = position + header_size, position + header_size + fat_size
            while entry < end:
                kind, _, entry_header, payload = struct.unpack_from("<HHIQ", section, entry)
                arch = struct.unpack_from("<I", section, entry + 28)[0]
                if arch != keep:
                    start = entry + entry_header
                    section[start:start + payload] = bytes(payload)
                    zeroed[f"{'ptx' if kind == 1 else 'sm'}_{arch}"] += payload
                entry += entry_header + payload
            position = end
        handle.seek(offset)
        handle.write(section)
    return zeroed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library")
    parser.add_argument("--keep", type=int, default=90, help="the architecture kept (90: H100/H200)")
    args = parser.parse_args()
    zeroed = slim(args.library, args.keep)
    print(", ".join(f"{name} {count / 1e6:.1f} MB" for name, count in sorted(zeroed.items())), "zeroed")


if __name__ == "__main__":
    main()
