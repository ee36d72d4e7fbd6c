"""What a preset and its variants are: the dataclasses the catalog (models/catalog.py) and the user's
own presets (models/user_presets.py) are written in, and where built variants live.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from models.errors import InputError, UnknownVariant

Task = Literal["qa", "generation"]
Runtime = Literal["torch", "onnxruntime"]
VARIANTS = ("baseline", "optimized", "pruned", "pruned-optimized")
# one colour per variant wherever it is drawn: the app's live charts and the reports' plots
VARIANT_COLORS = {"baseline": "#e45756", "optimized": "#4c78a8", "pruned": "#f58518", "pruned-optimized": "#54a24b"}
REPO_ROOT = Path(__file__).resolve().parents[1]


def chosen_variants(names: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """The variants a click or an API call names, in the showdown's order. An embedder may pass one name as a
    string; an empty choice and a name that is no variant are the caller's errors, said as such."""
    if not isinstance(names, (str, list, tuple, type(None))):  # list(5) would be a bare TypeError
        raise InputError(f"Variants are a list of names (got {names!r}).")
    names = [names] if isinstance(names, str) else list(names or [])
    if not names:
        raise InputError("Select at least one variant.")
    if unknown := [name for name in names if name not in VARIANTS]:
        raise InputError(f"Unknown variant{'s' if len(unknown) > 1 else ''} {', '.join(repr(n) for n in unknown)}; "
                         f"choose from {', '.join(VARIANTS)}.")
    return [variant for variant in VARIANTS if variant in names]


def artifacts_root() -> Path:
    """Built variants; override with SHOWDOWN_ARTIFACTS (tests point it at a temporary folder). Set but empty is the
    default, as every other setting (it had built into the current folder)."""
    return Path(os.environ.get("SHOWDOWN_ARTIFACTS", "").strip() or REPO_ROOT / "artifacts")


@dataclass(frozen=True)
class Source:
    """Where a variant's weights come from."""

    kind: Literal["local", "hub", "package", "built"]
    location: str = ""  # local path (relative to the repo), Hub repo id, or "package/relative/file"
    revision: str | None = None
    subfolder: str = ""


@dataclass(frozen=True)
class PruneSpec:
    """How the build cuts a `pruned` variant from its baseline (a user's model; the defaults commit theirs)."""

    heads_kept: float = 0.67  # share of attention heads kept, the same number in every layer
    ffn_kept: float = 0.67  # share of FFN neurons kept per layer
    layers_dropped: int = 0  # whole layers removed, those whose absence costs the least
    recovery_steps: int = 300  # distillation steps from the baseline on the shared SQuAD training articles
    data: str | None = None  # your own SQuAD-format JSON instead

    def __post_init__(self) -> None:  # a share above 1 silently meant no pruning at all
        if not (0 < self.heads_kept <= 1 and 0 < self.ffn_kept <= 1):
            raise InputError(f"heads and FFN shares kept are in (0, 1]; got {self.heads_kept} and {self.ffn_kept}")
        if self.layers_dropped < 0 or self.recovery_steps < 1:
            raise InputError(f"layers dropped must be ≥ 0 and recovery steps ≥ 1; got {self.layers_dropped} and "
                             f"{self.recovery_steps}")


@dataclass(frozen=True)
class Variant:
    name: str  # one of VARIANTS
    runtime: Runtime
    source: Source
    built_from: str | None = None  # the variant this one is built from
    steps: tuple[str, ...] = ()  # build steps, e.g. ("export", "graph-optimize", "quantize-int8")
    how_to_build: str = ""
    recipe_dir: str = ""  # committed pruning plan + recovery delta that the build assembles from
    prune: PruneSpec | None = None  # the build prunes and recovers it from `built_from` (optimize/prune/)
    prompt_lookup: bool = False  # an ONNX decoder decodes with exact prompt lookup by default (models/decoding.py)


@dataclass(frozen=True)
class Preset:
    name: str
    task: Task
    title: str
    variants: tuple[Variant, ...]
    default: bool = False
    notes: str = ""
    fetch_on_start: bool = False  # the background build downloads its Hub variants (a Space's pushed repos)
    reading_questions: int | None = None  # generation: held-out questions its reading comprehension is measured on (None: all)

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise UnknownVariant(f"Unknown variant '{name}' for {self.title}; choose one of {', '.join(v.name for v in self.variants)}.")

    def built_dir(self, variant: str) -> Path:
        return artifacts_root() / self.name / variant


OPTIMIZE_STEPS = ("export-onnx", "graph-optimize", "quantize-dynamic-int8 (CPU) / fp16 (CUDA)")


def optimized_variant(preset: str, task: str, built_from: str = "baseline", name: str = "optimized",
                      prompt_lookup: bool = False) -> Variant:
    return Variant(
        name=name, runtime="onnxruntime", source=Source("built"), built_from=built_from, steps=OPTIMIZE_STEPS,
        how_to_build=f"python -m optimize build --task {task} --preset {preset} --variant {name}",
        prompt_lookup=prompt_lookup,
    )
