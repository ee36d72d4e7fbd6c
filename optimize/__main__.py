"""`python -m optimize <stage>`: the offline build. Each stage is a small module with its own options."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m optimize", description=__doc__)
    stages = parser.add_subparsers(dest="stage", required=True)

    train = stages.add_parser("train-qa", help="fine-tune all-MiniLM-L6-v2 on SQuAD 2.0 (held-out articles)")
    train.add_argument("--data", type=Path, help="SQuAD 2.0 JSON (default ../shared/data/squad-v2-dev/dev-v2.0.json)")
    train.add_argument("--output", type=Path, default=Path("weights/qa-minilm-squad2"))
    train.add_argument("--epochs", type=int, default=3)
    train.add_argument("--learning-rate", type=float, default=1e-4)
    train.add_argument("--seed", type=int, default=42)
    train.add_argument("--answerable-first-epochs", type=int, default=1)
    train.add_argument("--null-fraction", type=float, default=0.5)
    train.add_argument("--answerability-weight", type=float, default=0.0,
                       help="weight of the span-vs-null margin loss (trains the no-answer decision directly)")
    train.add_argument("--init-from", type=Path, help="continue from these weights (a second stage)")
    train.add_argument("--negatives-share", type=float, default=0.3,
                       help="share of answerable questions also paired with another paragraph of their article (unanswerable)")
    train.add_argument("--removed-answer-share", type=float, default=0.0,
                       help="share of answerable questions also asked of their paragraph with the answer's sentences "
                            "taken out (unanswerable, on topic)")
    train.add_argument("--short-context-share", type=float, default=0.0,
                       help="share of answerable questions also asked of their answer's sentence with one sentence "
                            "either side (answerable, short)")
    train.add_argument("--swapped-name-share", type=float, default=0.0,
                       help="share of answerable questions also asked with a name swapped for one from another article "
                            "that the paragraph lacks (unanswerable, on topic)")
    train.add_argument("--no-extra-data", action="store_true", help="train on the dev file's training articles only")
    train.add_argument("--full-data", action="store_true",
                       help="add the whole SQuAD 1.1 training set and tune the threshold on four validation articles "
                            "(squad.WIDE_VALIDATION); the test articles stay the same")
    train.add_argument("--answerability-stage", action="store_true",
                       help="a second stage for a --full-data model (with --init-from): the SQuAD 2.0 files only, where "
                            "the real unanswerable questions are, validated on the same four articles")
    train.add_argument("--more-negatives", action="store_true",
                       help="also train on the 13 more SQuAD 2.0 dev articles (../shared/data/squad-v2-dev-more: "
                            "1,964 real unanswerable questions)")
    train.add_argument("--no-test", action="store_true",
                       help="score validation only: the test articles are scored once, by remeasure-qa, for a "
                            "candidate its validation rule has chosen")
    train.add_argument("--batch-size", type=int, default=16)
    train.add_argument("--threads", type=int, default=2)
    train.add_argument("--no-bf16", action="store_true", help="no bf16 autocast even where the CPU has bf16 instructions")
    train.add_argument("--save-compact", action="store_true",
                       help="write the running job's last checkpoint to weights/train-jobs/ (fp16, no AdamW state) and exit")
    train.add_argument("--stop-after", type=int, metavar="STEPS",
                       help="checkpoint and stop after this many steps of this run; the same command continues "
                            "(checkpoint and log under artifacts/train-jobs/<output name>/)")

    prune = stages.add_parser("prune", help="structured pruning + distillation recovery")
    prune.add_argument("--task", choices=("qa", "generation"), default="qa")
    prune.add_argument("--heads-kept", type=int, default=8, help="QA: attention heads kept per layer (of 12)")
    prune.add_argument("--ffn-kept", type=int, help="FFN neurons kept per layer, of 1536 (QA default 1024, generation 1536)")
    prune.add_argument("--threads", type=int, default=2, help="torch threads (QA: two candidates can run side by side)")
    prune.add_argument("--qa-layers-dropped", type=int, default=0,
                       help="QA: encoder layers removed (those whose absence costs the least calibration loss)")
    prune.add_argument("--layers-dropped", type=int, default=8, help="generation: decoder layers removed (of 30)")
    prune.add_argument("--ffn-pruned-share", type=float, default=0.0,
                       help="generation: share of all FFN neurons removed, ranked across layers (overrides --ffn-kept)")
    prune.add_argument("--epochs", type=int, default=1, help="QA recovery epochs")
    prune.add_argument("--steps", type=int, default=300, help="generation recovery steps (LoRA distillation)")
    prune.add_argument("--learning-rate", type=float, help="recovery learning rate (QA 1e-4, generation 1e-3)")
    prune.add_argument("--skip-before", action="store_true", help="generation: skip measuring before recovery")
    prune.add_argument("--stop-after", type=int, metavar="STEPS",
                       help="checkpoint and stop after this many recovery steps; the same command continues "
                            "(checkpoint and log under artifacts/recovery-jobs/ or artifacts/train-jobs/<output name>/)")
    prune.add_argument("--output", type=Path, help="default weights/<preset>-pruned")
    prune.add_argument("--data", type=Path)
    prune.add_argument("--baseline", type=Path, default=Path("weights/qa-minilm-squad2"),
                       help="QA: the model pruned and the distillation teacher")
    prune.add_argument("--full-data", action="store_true",
                       help="QA: distil on the whole SQuAD 1.1 training set too, validate on 4 articles (as train-qa --full-data)")
    prune.add_argument("--train-share", type=float, default=1.0, help="QA: distil on this seeded share of the windows")
    prune.add_argument("--batch-size", type=int, default=16, help="QA recovery batch size")
    prune.add_argument("--no-bf16", action="store_true", help="QA: no bf16 autocast")
    prune.add_argument("--freeze-word-embeddings", action="store_true",
                       help="QA: keep the baseline's word embeddings (a lent GPU's trip back then skips them)")
    prune.add_argument("--save-compact", action="store_true",
                       help="QA: write the running job's compact checkpoint under weights/train-jobs/ (to commit) and exit")

    sweep_qa = stages.add_parser("sweep-qa", help="accuracy/latency of QA pruning sparsities (before recovery)")
    sweep_qa.add_argument("--baseline", type=Path, default=Path("weights/qa-minilm-squad2"), help="the model pruned")
    sweep_qa.add_argument("--full-data", action="store_true", help="validate on the 4 validation articles of train-qa --full-data")
    sweep_qa.add_argument("--recovered", type=Path, nargs="+",
                          help="instead: tabulate these pruned-and-recovered candidate folders beside the baseline")
    stages.add_parser("sweep-generation", help="accuracy/speed of dropping decoder layers and FFN neurons (before recovery)")

    remeasure = stages.add_parser("remeasure-qa", help="measure saved QA weights again on the held-out articles; "
                                  "refit their answerability verifier and null threshold on validation")
    remeasure.add_argument("--weights", type=Path, action="append", help="model folder (repeatable; default: both QA models)")
    diagnose = stages.add_parser("diagnose-qa", help="spans vs answerability: margin AUC, best-threshold F1 (reports/)")
    diagnose.add_argument("--weights", type=Path, action="append", help="model folder (repeatable; default: both QA models)")

    bench = stages.add_parser("bench", help="project variants vs transformers pipeline and optimum INT8, one run")
    bench.add_argument("--task", choices=("qa", "generation"), action="append")
    bench.add_argument("--quick", action="store_true", help="few rounds, no long document (the regression test's setting)")
    bench.add_argument("--no-app", action="store_true", help="skip the gradio_client round trip")
    bench.add_argument("--output", type=Path, help="folder for bench.json / bench.md (default reports/)")

    stages.add_parser("instructions", help="the public instruction set, scored for every ready generation variant (reports/)")

    grid_bench = stages.add_parser("gguf-grid-bench", help="MatMulNBits forms of a Q4_1 GGUF weight vs fp32 MatMul (reports/)")
    grid_bench.add_argument("--rounds", type=int, help="timed calls per variant (default 200)")

    build = stages.add_parser("build", help="build variants: ONNX export, graph optimization, INT8/FP16")
    build.add_argument("--task", choices=("qa", "generation"), required=True)
    build.add_argument("--preset", help="catalog preset (default: the task's offline default)")
    build.add_argument("--variant", default="optimized", help="variant to build (default optimized)")
    build.add_argument("--force", action="store_true", help="rebuild even when the manifest is up to date")
    build.add_argument("--no-eval", action="store_true", help="skip the accuracy measurement")
    build.add_argument("--recipe", choices=("int8", "fp32", "gguf-q4", "gguf-q4-int8"),
                       help="one explicit ONNX recipe instead of the default ladder (gguf-q4*: a GGUF source's own weights)")
    build.add_argument("--full-ladder", action="store_true",
                       help="measure every recipe rung again, also those recorded as rejected for this source "
                            "(optimize/quantize/ladder_record.json), and record the result")
    build.add_argument("--allow-missed-gates", action="store_true",
                       help="publish a variant that misses an accuracy gate, recording the miss (default: fail)")
    build.add_argument("--model", metavar="ID_OR_PATH",
                       help="your model (a Hub id or a folder): add it to the user catalog and build all four variants")
    build.add_argument("--name", help="with --model: the preset's name (default: from the model id)")
    build.add_argument("--revision", help="with --model: a Hub revision (branch, tag or commit)")
    build.add_argument("--heads-kept", type=float, default=0.67, help="with --model: share of attention heads kept (GQA: of each group's queries)")
    build.add_argument("--ffn-kept", type=float, default=0.67, help="with --model: share of FFN neurons kept")
    build.add_argument("--layers-dropped", type=int, default=0, help="with --model: whole layers removed")
    build.add_argument("--recovery-steps", type=int, default=300, help="with --model: distillation steps after pruning")
    build.add_argument("--data", help="with --model: your own SQuAD-format JSON for recovery (default: the shared SQuAD data)")
    build.add_argument("--reading-questions", type=int, metavar="N",
                       help="with --model, generation: measure reading comprehension on the first N held-out questions "
                            "(default all 616: minutes per variant on 2 cores; a small N is noise, its interval says so)")

    verify = stages.add_parser("verify", help="measure every gate of every built variant again here, no record read; "
                                              "say where the records disagree (reports/verify-*)")
    verify.add_argument("--task", choices=("qa", "generation"), action="append")

    report = stages.add_parser("report", help="measure every ready variant side by side; write reports/")
    report.add_argument("--task", choices=("qa", "generation"), action="append")
    report.add_argument("--rounds", type=int, help="timed rounds per variant")

    push = stages.add_parser("push", help="upload every ready variant to the Hub, one repo each, with cards")
    push.add_argument("--repo-prefix", required=True, help="ORG/NAME: repos ORG/NAME-<task>-<variant>")
    push.add_argument("--private", action="store_true")

    space = stages.add_parser("deploy-space", help="upload the app to a Space that serves the pushed repos")
    space.add_argument("--space", help="ORG/NAME of the Space (default: $HF_SPACE)")
    space.add_argument("--hub-prefix", help="the --repo-prefix given to push (default: $SHOWDOWN_HUB_PREFIX)")
    space.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                       help="the Space's hardware: gpu installs requirements-gpu.txt (CUDA builds of ONNX Runtime)")
    space.add_argument("--private", action="store_true")

    args = parser.parse_args(argv)
    from models.logs import configure_logging

    configure_logging()

    if args.stage == "train-qa":
        from optimize.train.finetune_qa import TrainConfig, train
        config = TrainConfig(output=args.output, epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed,
                             answerable_first_epochs=args.answerable_first_epochs, null_fraction=args.null_fraction,
                             init_from=args.init_from, answerability_weight=args.answerability_weight,
                             negatives_share=args.negatives_share, removed_answer_share=args.removed_answer_share,
                             swapped_name_share=args.swapped_name_share, short_context_share=args.short_context_share,
                             batch_size=args.batch_size, threads=args.threads)
        if args.no_extra_data:
            config.extra_data = ()
        _data_options(config, args)
        if args.more_negatives:
            from optimize.evaluate import squad
            config.extra_data = (*config.extra_data, squad.MORE_DEV_PATH)
        config.score_test = not args.no_test
        if args.save_compact:
            from optimize.train.finetune_qa import save_compact
            print(f"compact checkpoint (commit it to continue in a fresh clone): {save_compact(config)}")
            return 0
        result = train(config, stop_after=args.stop_after)
        if result.get("stopped"):
            print(f"training stopped; checkpoint {result['checkpoint']}. Run the same command to continue.")
    elif args.stage == "prune" and args.task == "generation":
        from optimize.prune import decoder
        from optimize.train import recover_decoder
        result = recover_decoder.run(
            decoder.DecoderPruneConfig(layers_dropped=args.layers_dropped, ffn_kept=args.ffn_kept or 1536,
                                                ffn_pruned_share=args.ffn_pruned_share),
            recover_decoder.RecoveryConfig(steps=args.steps, learning_rate=args.learning_rate or 1e-3, threads=args.threads),
            args.output or Path("weights/generation-smollm2-pruned"), measure_before=not args.skip_before,
            stop_after=args.stop_after)
        if "stopped_at_step" in result:
            print(f"recovery stopped at step {result['stopped_at_step']}/{result['steps']}; checkpoint {result['checkpoint']}. "
                  "Run the same command to continue.")
        else:
            print({k: result[k] for k in ("layers_kept", "before_recovery", "after_recovery")})
    elif args.stage == "prune":
        from optimize.evaluate.gates import GateFailed
        from optimize.prune.encoder import PruneConfig, RecoveryConfig
        from optimize.train.finetune_qa import TrainConfig, save_compact
        from optimize.train.recover_qa import run as prune_run
        # distillation: the teacher already knows "no answer", so no curriculum; half the null windows
        config = TrainConfig(output=args.output or Path("weights/qa-minilm-squad2-pruned"), epochs=args.epochs,
                             learning_rate=args.learning_rate or 1e-4, answerable_first_epochs=0, threads=args.threads,
                             batch_size=args.batch_size)
        _data_options(config, args)
        if args.save_compact:
            print(f"compact checkpoint (commit it to continue in a fresh clone): {save_compact(config)}")
            return 0
        try:
            result = prune_run(args.baseline, PruneConfig(heads_kept=args.heads_kept, ffn_kept=args.ffn_kept or 1024,
                                                          layers_dropped=args.qa_layers_dropped),
                               config, RecoveryConfig(freeze_word_embeddings=args.freeze_word_embeddings),
                               train_share=args.train_share, stop_after=args.stop_after)
        except GateFailed as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if result.get("stopped"):
            print(f"recovery stopped; checkpoint {result['checkpoint']}. Run the same command to continue.")
    elif args.stage == "sweep-qa":
        from optimize.prune import sweep_encoder as sweep_qa
        from optimize.train.finetune_qa import TrainConfig
        config = TrainConfig()
        _data_options(config, args)
        sweep_qa.recovered(args.recovered, args.baseline) if args.recovered else sweep_qa.run(args.baseline, config)
    elif args.stage == "sweep-generation":
        from optimize.prune.sweep_decoder import run as sweep_generation
        sweep_generation()
    elif args.stage == "remeasure-qa":
        from optimize.train.finetune_qa import remeasure_saved
        for weights in args.weights or (Path("weights/qa-minilm-squad2"), Path("weights/qa-minilm-squad2-pruned")):
            remeasure_saved(weights)
    elif args.stage == "diagnose-qa":
        from optimize.evaluate.answerability import run as diagnose_qa
        diagnose_qa(*([tuple(args.weights)] if args.weights else []))
    elif args.stage == "build":
        from models.catalog import default_preset, preset
        from models.errors import InputError, VariantUnavailable
        from optimize.build import build_variant
        from optimize.evaluate.gates import GateFailed

        try:
            if args.model:
                return _build_model(args)
            chosen = preset(args.preset) if args.preset else default_preset(args.task)
            from optimize.quantize.recipes import named_recipe
            recipe = named_recipe(chosen.task, args.recipe) if args.recipe else None
            print(build_variant(chosen, args.variant, recipe=recipe, force=args.force or args.full_ladder,
                                evaluate=not args.no_eval, strict=not args.allow_missed_gates, full_ladder=args.full_ladder))
        except (InputError, VariantUnavailable, GateFailed) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    elif args.stage == "verify":
        from optimize.verify import run
        return run(args.task or ["qa", "generation"])
    elif args.stage == "report":
        from optimize.publish.report import ReportConfig, run
        config = ReportConfig()
        if args.rounds:
            config = replace(config, qa_rounds=args.rounds, generation_rounds=args.rounds)
        run(config, tuple(args.task or ("qa", "generation")))
    elif args.stage == "bench":
        from optimize.bench.run import BenchConfig
        from optimize.bench.run import run as bench_run
        config = (BenchConfig(qa_rounds=5, long_document_words=0, generation_rounds=2, app_rounds=5, outside_f1=False,
                              agreement_prompts=2)
                  if args.quick else BenchConfig())
        if args.no_app:
            config = replace(config, app=False)
        bench_run(config, tuple(args.task or ("qa", "generation")), **({"output": args.output} if args.output else {}))
    elif args.stage == "instructions":
        from optimize.evaluate.instructions import run as instructions_run
        instructions_run()
    elif args.stage == "gguf-grid-bench":
        from optimize.bench.gguf_grid import GridBenchConfig
        from optimize.bench.gguf_grid import run as grid_bench_run
        grid_bench_run(replace(GridBenchConfig(), rounds=args.rounds) if args.rounds else GridBenchConfig())
    elif args.stage == "push":
        from optimize.publish.push import push as push_variants
        for repo in push_variants(args.repo_prefix, private=args.private):
            print(repo)
    elif args.stage == "deploy-space":
        from huggingface_hub.errors import HfHubHTTPError

        from models.errors import ConfigError
        from optimize.publish.space import run as deploy_space
        try:
            return deploy_space(args.space, args.hub_prefix, args.device, args.private)
        except (ConfigError, HfHubHTTPError) as error:  # a bad token or name: the Hub's message, no trace
            print(f"error: {error}", file=sys.stderr)
            return 2
    return 0


def _data_options(config, args) -> None:
    """--no-bf16, --full-data and --data (where the stage has them): train-qa, prune and sweep-qa."""
    if getattr(args, "no_bf16", False):
        config.bf16 = False
    from optimize.evaluate import squad

    if getattr(args, "full_data", False):
        config.extra_data, config.split = (squad.TRAIN_HEAD_PATH, squad.SQUAD11_TRAIN_PATH), squad.WIDE_VALIDATION
    if getattr(args, "answerability_stage", False):
        config.extra_data, config.split = (squad.TRAIN_HEAD_PATH,), squad.WIDE_VALIDATION
    if getattr(args, "data", None):
        config.data = args.data


def _build_model(args) -> int:
    """`build --model`: write the preset into the user catalog, build its four variants, say what each became."""
    from models.catalog import PruneSpec
    from models.user_presets import add_preset, catalog_path
    from optimize.build import build_preset

    spec = PruneSpec(heads_kept=args.heads_kept, ffn_kept=args.ffn_kept, layers_dropped=args.layers_dropped,
                     recovery_steps=args.recovery_steps, data=args.data)
    added = add_preset(args.model, args.task, args.name, args.revision, spec, args.reading_questions)
    print(f"preset '{added.name}' written to {catalog_path()}")
    outcome = build_preset(added, force=args.force, evaluate=not args.no_eval, strict=not args.allow_missed_gates)
    for variant, result in outcome.items():
        print(f"  {variant}: {result}")
    print(f"serve it: SHOWDOWN_{args.task.upper()}_PRESET={added.name} python app.py")
    return 0 if all(result == "ready" for result in outcome.values()) else 2


if __name__ == "__main__":
    raise SystemExit(main())
