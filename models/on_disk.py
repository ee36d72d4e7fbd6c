"""What a preset's variant is on this machine's disk, read without loading, downloading or building
anything: where its weights are, whether they still match their manifest and their source, and how
to fix a variant that does not. The showdown's status and first-start builder ask these."""
from __future__ import annotations

from pathlib import Path

from models.catalog import REPO_ROOT, Preset
from models.manifest import built_steps, read_manifest, stale_source, verify


def locate(preset: Preset, variant: str) -> Path | None:
    """The weights directory if present now."""
    spec = preset.variant(variant)
    if spec.source.kind == "local":
        path = REPO_ROOT / spec.source.location
        return path if (path / "config.json").exists() else None
    if spec.source.kind == "hub":
        from huggingface_hub import snapshot_download
        try:
            return Path(snapshot_download(spec.source.location, revision=spec.source.revision, local_files_only=True))
        except Exception:  # not in the local Hub cache
            return None
    path = preset.built_dir(variant)
    return path if (path / "manifest.json").exists() else None


def fix(preset: Preset, variant: str) -> str:
    spec = preset.variant(variant)
    if spec.source.kind == "hub":
        return f"download it again: `hf download {spec.source.location} --force-download`"
    return f"rebuild it: `{spec.how_to_build}`" if spec.how_to_build else f"replace {spec.source.location}"


def corrupt(preset: Preset, variant: str, path: Path) -> str | None:
    """What is wrong with the variant's files against its manifest, and the fix; None if nothing."""
    problems = verify(path)
    return f"{'; '.join(problems)}; {fix(preset, variant)}" if problems else None


def servable(preset: Preset, variant: str) -> bool:
    """Present and matching its manifest: a corrupt variant counts as missing (it is rebuilt)."""
    path = locate(preset, variant)
    return path is not None and not verify(path)


def stale(preset: Preset, variant: str) -> str | None:
    """Why a built variant no longer matches its source (a retrained baseline), or None: served, it would answer
    as the old source's variant under the numbers measured against it."""
    spec = preset.variant(variant)
    source = locate(preset, spec.built_from) if spec.source.kind == "built" and spec.built_from else None
    return stale_source(preset.built_dir(variant), source) if source is not None else None


def built_description(preset: Preset, variant: str, path: Path) -> str:
    """The steps that were built (the manifest's, with the rejected recipes), else the catalog's."""
    spec = preset.variant(variant)
    manifest = read_manifest(path)
    steps = built_steps(manifest) if manifest else " → ".join(spec.steps) or spec.source.kind
    return f"{spec.runtime}; {steps}"


def manifest_stamp(preset: Preset, variant: str) -> int | None:
    """When a built variant's manifest was written (a rebuild rewrites it); None for weights that are not built."""
    if preset.variant(variant).source.kind != "built":
        return None
    try:
        return (preset.built_dir(variant) / "manifest.json").stat().st_mtime_ns
    except OSError:
        return None
