"""Presets a user added with `python -m optimize build --model ID_OR_PATH --task qa|generation`:
one YAML file beside the artifacts they describe (`<artifacts>/catalog.yaml`), so the catalog and
what was built from it travel together.

    format: 1
    presets:
      - name: roberta-base-squad2
        task: qa
        model: deepset/roberta-base-squad2   # a Hub id, or a local folder
        revision: main                        # optional
        prune: {heads_kept: 0.67, ffn_kept: 0.67, layers_dropped: 0, recovery_steps: 300}
        reading_questions: 2115               # optional, generation: held-out questions read (default all)

Every preset gets the four variants: the model as it is (`baseline`), its ONNX Runtime build
(`optimized`), a structurally pruned copy recovered by distillation (`pruned`), and that copy's
ONNX Runtime build (`pruned-optimized`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, fields
from pathlib import Path

from models.errors import ConfigError, InputError
from models.preset import Preset, PruneSpec, Source, Task, Variant, artifacts_root, optimized_variant

FORMAT = 1
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def catalog_path() -> Path:
    return artifacts_root() / "catalog.yaml"


def _read() -> list[dict]:
    import yaml

    path = catalog_path()
    if not path.exists():
        return []
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML ({str(error).splitlines()[0]}); fix it or delete it "
                          "(`python -m optimize build --model` writes it again)") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds no mapping with format and presets; fix it or delete it")
    if data.get("format") != FORMAT:
        raise InputError(f"{path} has format {data.get('format')!r}; this version reads format {FORMAT}.")
    if not isinstance(presets := data.get("presets") or [], list):
        raise ConfigError(f"{path}: presets must be a list of name, task and model entries; fix it or delete it")
    return presets


def user_presets() -> tuple[Preset, ...]:
    entries = _read()
    for number, entry in enumerate(entries, 1):  # a hand edit is named where it broke, before anything reads it
        missing = [key for key in ("name", "task", "model") if not isinstance(entry, dict) or key not in entry]
        if missing or entry["task"] not in ("qa", "generation"):
            raise ConfigError(f"{catalog_path()}: preset {number} needs name, task (qa or generation) and model"
                              + (f"; it lacks {', '.join(missing)}" if missing else f"; its task is {entry['task']!r}"))
        if not isinstance(entry.get("prune") or {}, dict):
            raise ConfigError(f"{catalog_path()}: preset {number}'s prune must map settings to values (got {entry['prune']!r})")
    return tuple(_preset(entry) for entry in entries)


def _preset(entry: dict) -> Preset:
    name, task, model = entry["name"], entry["task"], str(entry["model"])
    local = Path(model).expanduser()
    source = Source("local", str(local.resolve())) if local.exists() else Source("hub", model, entry.get("revision"))
    how = f"python -m optimize build --task {task} --preset {name} --variant"
    prune = PruneSpec(**{k: v for k, v in (entry.get("prune") or {}).items() if k in {f.name for f in fields(PruneSpec)}})
    return Preset(name=name, task=task, title=f"{model} (your model)", notes=f"added by `python -m optimize build --model {model}`",
                  reading_questions=entry.get("reading_questions"), variants=(
                      Variant("baseline", "torch", source, how_to_build=f"python -m optimize build --model {model} --task {task}"),
                      optimized_variant(name, task),
                      Variant("pruned", "torch", Source("built"), built_from="baseline", prune=prune,
                              steps=("structured-prune (heads, FFN neurons, layers)", "distill from baseline"),
                              how_to_build=f"{how} pruned"),
                      optimized_variant(name, task, built_from="pruned", name="pruned-optimized"),
                  ))


def add_preset(model: str, task: Task, name: str | None = None, revision: str | None = None,
               prune: PruneSpec | None = None, reading_questions: int | None = None,
               built_in: Iterable[str] = (), replace: bool = False) -> Preset:
    """Write the preset for `model` in the user catalog and return it; `built_in`: the catalog's own preset
    names, which a user's preset may not take. A preset of that name for another model or task is replaced
    only when asked (`replace`): a second folder of the same name had silently taken the first one's place."""
    import yaml

    name = name or re.sub(r"[^a-z0-9._-]+", "-", Path(model.rstrip("/")).name.lower()).strip("-")
    if not NAME.match(name):
        raise InputError(f"'{name}' is not a usable preset name: lower-case letters, digits, '.', '_' and '-', up to 64.")
    if name in set(built_in):
        raise InputError(f"'{name}' is a built-in preset; pass --name to call yours something else.")
    entry = {"name": name, "task": task, "model": model, **({"revision": revision} if revision else {}),
             "prune": asdict(prune or PruneSpec()), **({"reading_questions": reading_questions} if reading_questions else {})}
    held = next((e for e in _read() if e["name"] == name), None)
    if held and (str(held["model"]), held["task"]) != (model, task) and not replace:
        raise InputError(f"preset '{name}' already holds {held['model']} ({held['task']}); pass --name to add this one "
                         "beside it, or --force to replace it")
    entries = [e for e in _read() if e["name"] != name] + [entry]
    path = catalog_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"format": FORMAT, "presets": entries}, sort_keys=False))
    return _preset(entry)
