"""`python -m optimize build`: a variant end to end (export, graph optimization, the recipe ladder,
the gate of its promise, an atomic manifest), or with `--model` a preset of yours and its four variants."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from models.errors import InputError
from models.preset import PruneSpec
from optimize.commands.common import config_flags, config_from, flags_given

NAME = "build"
HELP = "build variants: ONNX export, graph optimization, INT8/FP16"
PRUNE_FLAGS = {"heads_kept": "share of attention heads kept (GQA: of each group's queries)",
               "ffn_kept": "share of FFN neurons kept", "layers_dropped": "whole layers removed",
               "recovery_steps": "distillation steps after pruning",
               "data": "your own SQuAD-format JSON for recovery (none: the shared SQuAD data)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=("qa", "generation"), required=True)
    parser.add_argument("--preset", help="catalog preset (default: the task's offline default)")
    parser.add_argument("--variant", action="append", help="variant to build (default optimized); repeat it to build "
                                                            "several in one process, in the order given")
    parser.add_argument("--force", action="store_true", help="rebuild even when the manifest is up to date")
    parser.add_argument("--no-eval", action="store_true", help="skip the accuracy measurement")
    parser.add_argument("--recipe", choices=("int8", "fp32", "gguf-q4", "gguf-q4-int8", "gguf-q4-int8-m8",
                                             "gguf-q4-int8-folded"),
                            help="one explicit ONNX recipe instead of the default ladder (gguf-q4*: a GGUF source's own weights)")
    parser.add_argument("--full-ladder", action="store_true",
                            help="measure every recipe rung again, also those recorded as rejected for this source "
                                 "(optimize/quantize/ladder_record.json), and record the result")
    parser.add_argument("--allow-missed-gates", action="store_true",
                            help="publish the first recipe even if it misses an accuracy gate, recording the miss; "
                                 "the ladder's other recipes are not tried (default: fail, or take the next recipe)")
    parser.add_argument("--model", metavar="ID_OR_PATH",
                            help="your model (a Hub id or a folder): add it to the user catalog and build all four variants")
    parser.add_argument("--name", help="with --model: the preset's name (default: from the model id)")
    parser.add_argument("--revision", help="with --model: a Hub revision (branch, tag or commit)")
    config_flags(parser, PruneSpec, PRUNE_FLAGS, prefix="with --model: ")
    parser.add_argument("--reading-questions", type=int, metavar="N",
                            help="with --model, generation: measure reading comprehension on the first N held-out questions "
                                 "(default all 2,115: tens of minutes per variant on 2 cores; a small N is noise, its interval says so)")


def run(args: argparse.Namespace) -> int:
    from models.catalog import default_preset, preset
    from models.errors import InputError, VariantUnavailable
    from optimize.build import build_variant
    from optimize.evaluate.gates import GateFailed
    from optimize.quantize.recipes import named_recipe

    try:
        if args.model:
            return _build_model(args)
        chosen = preset(args.preset) if args.preset else default_preset(args.task)
        variants = args.variant or ["optimized"]
        check_catalog_build(args, chosen, [chosen.variant(name) for name in variants])  # all before minutes of work
        recipe = named_recipe(chosen.task, args.recipe) if args.recipe else None
        for variant in variants:
            print(build_variant(chosen, variant, recipe=recipe, force=args.force or args.full_ladder,
                                evaluate=not args.no_eval, strict=not args.allow_missed_gates, full_ladder=args.full_ladder))
    except (InputError, VariantUnavailable, GateFailed) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def check_catalog_build(args: argparse.Namespace, chosen, variants: list) -> None:
    """What a catalog build cannot do, said before it starts: each had been ignored, or (`--full-ladder --recipe`)
    had replaced the committed record of the default ladder's rejected rungs with one rung's."""
    if chosen.task != args.task:
        raise InputError(f"{chosen.name} is a {chosen.task} preset, not a {args.task} one")
    if model_only := flags_given(args, add_arguments, ("name", "revision", "reading_questions", *PRUNE_FLAGS),
                                 "--task", args.task):
        raise InputError("only with --model: " + ", ".join(model_only))
    if args.recipe and (not_onnx := [v.name for v in variants if v.runtime != "onnxruntime"]):
        raise InputError(f"--recipe is for the ONNX variants; {', '.join(not_onnx)} is not built with a recipe")
    if args.full_ladder and (args.recipe or args.no_eval or args.allow_missed_gates):
        raise InputError("--full-ladder measures the default ladder with its gates: not with --recipe, --no-eval or "
                         "--allow-missed-gates")


def check_model_folder(model: Path, task: str) -> None:
    """A folder `build --model` can build from: a model for the task (its config's head, else a transformers class
    for its family), weights and a tokenizer. Each lack had surfaced minutes later as a traceback, after "baseline:
    ready". A family pruning does not know still builds `optimized`, and says so."""
    import json

    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES)

    if not (model / "config.json").is_file():
        raise InputError(f"{model} is neither a model folder (with a config.json) nor a Hub id")
    try:
        config = json.loads((model / "config.json").read_text())
        model_type, architectures = config.get("model_type"), list(config.get("architectures") or [])
    except (ValueError, AttributeError, TypeError):
        raise InputError(f"{model / 'config.json'} is not a JSON object with a model_type") from None
    heads = {"qa": ("ForQuestionAnswering",), "generation": ("ForCausalLM", "LMHeadModel")}
    named = [t for t, suffixes in heads.items() for head in architectures if str(head).endswith(suffixes)]
    if named and task not in named:
        raise InputError(f"{model} holds a {architectures[0]}, a {named[0]} model: --task {named[0]}")
    if architectures and not named:  # a bare encoder or decoder: the head would be random weights, and every gate
        kind = "question-answering" if task == "qa" else "language-model"  # compares variants of that random model
        raise InputError(f"{model} holds a {architectures[0]}, which has no {kind} head: train one first "
                         f"(a {'...ForQuestionAnswering' if task == 'qa' else '...ForCausalLM'} model)")
    classes = {"qa": MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES, "generation": MODEL_FOR_CAUSAL_LM_MAPPING_NAMES}[task]
    if model_type not in classes:
        raise InputError(f"{model} is a '{model_type}' model, for which transformers has no "
                         f"{'question-answering' if task == 'qa' else 'causal language model'} class")
    if not any(model.glob("*.safetensors")) and not any(model.glob("pytorch_model*.bin")):
        raise InputError(f"{model} has no weights (*.safetensors or pytorch_model*.bin)")
    try:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(model)
    except Exception as error:  # noqa: BLE001 - whatever the tokenizer loaders raise on a folder without one
        raise InputError(f"{model} has no tokenizer that loads ({type(error).__name__}: "
                         f"{(str(error).strip().splitlines() or [''])[0][:160]})") from None


def _build_model(args) -> int:
    """`build --model`: write the preset into the user catalog, build its four variants, say what each became."""
    from models.catalog import PRESETS
    from models.user_presets import add_preset, catalog_path
    from optimize.build import build_preset

    spec = config_from(args, PruneSpec, PRUNE_FLAGS)
    if args.reading_questions is not None and args.reading_questions < 1:
        raise InputError(f"--reading-questions must be at least 1 (got {args.reading_questions}); leave it out for all")
    if args.variant:
        raise InputError("--model builds all four variants; --variant is for a preset already in the catalog "
                         "(build --preset NAME --variant X)")
    if spec.data:  # read by the pruned step, minutes in: its layout and articles are checked before anything is built
        from optimize.evaluate import squad

        data = Path(spec.data).expanduser()
        if not data.exists():
            raise InputError(f"--data {spec.data}: no such file")
        squad.load_articles(data)
        squad.check_recovery_data(data)
    model = Path(args.model).expanduser()
    looks_like_a_path = args.model.startswith((".", "/", "~")) or args.model.count("/") > 1 or model.exists()
    if looks_like_a_path:  # everything a folder can lack is said before anything is written to the catalog
        check_model_folder(model, args.task)
    added = add_preset(str(model.resolve()) if looks_like_a_path else args.model, args.task, args.name, args.revision,
                       spec, args.reading_questions, built_in=[preset.name for preset in PRESETS], replace=args.force)
    print(f"preset '{added.name}' written to {catalog_path()}")
    outcome = build_preset(added, force=args.force, evaluate=not args.no_eval, strict=not args.allow_missed_gates)
    for variant, result in outcome.items():
        print(f"  {variant}: {result}")
    if all(result == "ready" for result in outcome.values()):
        print(f"serve it: SHOWDOWN_{args.task.upper()}_PRESET={added.name} python app.py")
        return 0
    print("error: not every variant was built; the same command continues once the reason above is fixed", file=sys.stderr)
    return 2

