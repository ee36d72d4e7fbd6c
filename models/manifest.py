"""The contract between the offline build and the runtime: every built artifact is written
atomically with a manifest.json (source, steps, library versions, file sizes and sha256,
metrics). The build skips a stage whose manifest matches its inputs; the runtime checks the
files against it before loading."""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from models.catalog import artifacts_root
from models.errors import VariantUnavailable

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


def verify(directory: Path) -> list[str]:
    """What is wrong with a directory's files against its manifest: empty when every file is there
    with its size and sha256, or when there is no manifest to check against (committed weights)."""
    try:
        manifest = read_manifest(directory)
    except (OSError, ValueError) as error:
        return [f"manifest.json cannot be read ({type(error).__name__})"]
    problems, root = [], os.path.abspath(directory)  # os.path, not pathlib: /variants runs this on every call
    with _hash_lock:
        hashes = _cache()
    for name, expected in (manifest or {}).get("files", {}).items():
        try:
            stat = os.stat(os.path.join(root, name))
        except OSError:
            problems.append(f"{name} is missing")
            continue
        if stat.st_size != expected["bytes"]:
            problems.append(f"{name} has {stat.st_size:,} bytes, the manifest says {expected['bytes']:,}")
        elif cached_sha256(os.path.join(root, name), stat, hashes) != expected["sha256"]:
            problems.append(f"{name} does not match its sha256 in the manifest")
    return problems


HASH_CACHE = ".sha256-cache.json"  # in the artifacts root: {path: [bytes, mtime_ns, sha256]}
_hash_lock = threading.Lock()
_hashes: dict[Path, dict[str, list]] = {}  # per cache file, read once per process


def cached_sha256(path: str, stat: os.stat_result, hashes: dict[str, list]) -> str:
    """sha256 of a file (an absolute path, its stat, the cache), remembered by (path, size, mtime): a
    start with unchanged artifacts only stats them instead of reading every weight file again."""
    signature = [stat.st_size, stat.st_mtime_ns]
    known = hashes.get(path)
    if known and known[:2] == signature:
        return known[2]
    digest = sha256(Path(path))
    _remember({path: [*signature, digest]})
    return digest


def remember_manifest(directory: Path) -> None:
    """A manifest just written from these very files: its hashes go to the cache, so the first
    check after a build does not read the files again."""
    entries, root = {}, os.path.abspath(directory)
    for name, expected in (read_manifest(directory) or {}).get("files", {}).items():
        stat = os.stat(os.path.join(root, name))
        if stat.st_size == expected["bytes"]:
            entries[os.path.join(root, name)] = [stat.st_size, stat.st_mtime_ns, expected["sha256"]]
    _remember(entries)


def _cache() -> dict[str, list]:
    """The cache of the current artifacts root, read once per process (call with the lock held)."""
    cache_file = artifacts_root() / HASH_CACHE
    if cache_file not in _hashes:
        try:
            _hashes[cache_file] = json.loads(cache_file.read_text())
        except (OSError, ValueError):
            _hashes[cache_file] = {}
    return _hashes[cache_file]


def _remember(entries: dict[str, list]) -> None:
    if not entries:
        return
    cache_file = artifacts_root() / HASH_CACHE
    with _hash_lock:
        cache = _cache()
        cache.update(entries)
        with contextlib.suppress(OSError):  # a read-only artifacts folder only costs the cache
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            partial = cache_file.with_name(f"{HASH_CACHE}.{os.getpid()}")
            partial.write_text(json.dumps(cache))
            partial.replace(cache_file)


def recipe_text(recipe: dict) -> str:
    """A build recipe (optimize.build.OnnxRecipe as the manifest stores it) in a few words."""
    if recipe.get("exporter") == "gguf-grid":
        return (f"the GGUF's own 4-bit grid, {'int8' if recipe.get('quantize') else 'fp32'} compute"
                + (", minimums folded into each weight (zero points + 8-bit residual)" if recipe.get("fold_minimums")
                   else ", 8-bit minimums" if recipe.get("minimum_bits") == 8 else ""))
    if not recipe.get("quantize"):
        return "fp32"
    bits = recipe.get("weight_only_bits")
    text = f"weight-only INT{bits} (block {recipe.get('block_size')})" if bits else (
        "dynamic INT8" + (" per channel" if recipe.get("per_channel") else ""))
    if recipe.get("keep_fp32"):
        text += f", fp32 {' + '.join(recipe['keep_fp32'])}"
    if recipe.get("fp32_attention_share"):
        text += f", fp32 attention in the {recipe['fp32_attention_share']:.0%} most sensitive layers"
    if recipe.get("smooth_alpha"):
        text += ", SmoothQuant"
    return text


def rejected_recipes(manifest: dict) -> list[str]:
    """Each faster recipe the build tried and did not publish, with the gate it missed."""
    out = []
    for rejected in manifest.get("metrics", {}).get("rejected_recipes", []):
        # manifests written before `gates_missed` hold GateFailed's whole message: the gates are its middle
        missed = rejected.get("gates_missed") or [
            rejected.get("missed", "").split("accuracy gate: ", 1)[-1].split(". Try ", 1)[0]]
        out.append(f"rejected {recipe_text(rejected.get('recipe', {}))}: {'; '.join(missed)}")
    return out


def built_steps(manifest: dict) -> str:
    """What was actually built, in one line: the steps, then the rejected recipes."""
    return "; ".join([" → ".join(manifest.get("steps", [])), *rejected_recipes(manifest)])


def size_bytes(directory: Path, suffixes: tuple[str, ...] = (".safetensors", ".onnx", ".onnx_data", ".data", ".bin")) -> int:
    """Bytes of weights on disk (tokenizer and config files excluded)."""
    return sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file() and p.suffix in suffixes)


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Build into a staging folder beside `target`; rename into place only when complete. One process at a time:
    the app's first-start builder and `optimize build` on the same variant would delete each other's staging."""
    target = Path(target)
    staging = target.with_name(target.name + ".partial")
    with _building_alone(target):
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            yield staging
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        remember_manifest(target)


@contextlib.contextmanager
def _building_alone(target: Path) -> Iterator[None]:
    """`<target>.lock`, held by this build's process (it says which) until the build ends or dies."""
    lock_path, held = target.with_name(target.name + ".lock"), contextlib.ExitStack()
    try:  # only the lock's own refusal is "another process": the build's errors pass as they are
        lock = held.enter_context(locked(lock_path, wait=False))
    except BlockingIOError:
        holder = lock_path.read_text().strip() or "pid unknown"
        raise VariantUnavailable(f"{target.name} is being built by another process ({holder}); wait for it to finish") from None
    with held:
        if lock is not None:  # who holds it, for the message another build gets
            lock.seek(0)
            lock.truncate()
            lock.write(f"pid {os.getpid()}")
            lock.flush()
        yield


@contextlib.contextmanager
def locked(lock_path: Path, wait: bool = True) -> Iterator[IO | None]:
    """An exclusive lock on `lock_path` between processes (POSIX flock; elsewhere none: None), released when the block
    ends or the process dies. `wait` False: BlockingIOError at once while another process holds it."""
    try:
        import fcntl
    except ImportError:
        yield None
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        yield lock


_fingerprints: dict[tuple, str] = {}  # (folder, its files' names, sizes and mtimes) -> sha256, per process


def source_fingerprint(directory: Path) -> str:
    """sha256 over the source's weight and config files, so a retrained baseline triggers a rebuild.
    Not its manifest: a rebuilt source with the same weights (its build time differs) is the same source.
    An ONNX graph's external weights (`model.onnx.data`) count. Remembered for the process while no
    file's size or mtime changes: one build asks it of the same source for each record and cache."""
    files = [path for path in sorted(Path(directory).rglob("*")) if path.is_file()
             and path.suffix in (".safetensors", ".onnx", ".data", ".bin", ".json") and path.name != "manifest.json"]
    key = (str(Path(directory).resolve()), tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if key not in _fingerprints:
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        _fingerprints[key] = digest.hexdigest()
    return _fingerprints[key]


def stale_source(path: Path, source: Path | None = None) -> str | None:
    """Why a built variant is no longer what its source makes (its metrics were measured against the old source), or
    None: a retrained baseline leaves `optimized` loadable and "ready"; push would publish old numbers, the app serve
    them (its first start rebuilds it).
    `source`: where the source variant is now (the path its build recorded is gone once the checkout moves)."""
    inputs = (read_manifest(path) or {}).get("inputs", {})
    source = Path(source or inputs.get("source", ""))
    if inputs.get("source_sha256") and source.is_dir() and source_fingerprint(source) != inputs["source_sha256"]:
        return f"its source {source} changed since it was built"
    return None


def write_atomically(path: Path, text: str) -> None:
    """A process stopped mid-write leaves the old file or the new one, never half of one (a truncated committed
    record had failed every later build, a truncated bench.json every later single-task bench)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    try:
        partial.write_text(text)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
