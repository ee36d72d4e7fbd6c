"""The contract between the offline build and the runtime: every built artifact is written
atomically with a manifest.json (source, steps, library versions, file sizes and sha256,
metrics). The build skips a stage whose manifest matches its inputs; the runtime checks the
files against it before loading."""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import platform
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

LIBRARIES = ("torch", "transformers", "optimum", "optimum-onnx", "onnxruntime", "onnx")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return found


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files(directory: Path) -> dict[str, dict]:
    return {
        str(p.relative_to(directory)): {"bytes": p.stat().st_size, "sha256": sha256(p)}
        for p in sorted(directory.rglob("*")) if p.is_file() and p.name != "manifest.json"
    }


def write_manifest(directory: Path, source: str, steps: list[str], metrics: dict | None = None,
                   inputs: dict | None = None, **extra) -> dict:
    manifest = {
        "source": source, "steps": steps, "inputs": inputs or {}, "metrics": metrics or {},
        "versions": versions(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": files(directory), **extra,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def read_manifest(directory: Path) -> dict | None:
    path = Path(directory) / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def size_bytes(directory: Path, suffixes: tuple[str, ...] = (".safetensors", ".onnx", ".onnx_data", ".data", ".bin")) -> int:
    """Bytes of weights on disk (tokenizer and config files excluded)."""
    return sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file() and p.suffix in suffixes)


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Build into a staging folder beside `target`; rename into place only when complete."""
    target = Path(target)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
