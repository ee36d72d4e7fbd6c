"""`python -m optimize <stage>`: the offline build. Each stage is a small module with its own options."""
from __future__ import annotations

import argparse
import logging
import sys
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

    prune = stages.add_parser("prune", help="structured pruning + distillation recovery (QA)")
    prune.add_argument("--task", choices=("qa",), default="qa")
    prune.add_argument("--heads-kept", type=int, default=6, help="attention heads kept per layer (of 12)")
    prune.add_argument("--ffn-kept", type=int, default=768, help="FFN neurons kept per layer (of 1536)")
    prune.add_argument("--epochs", type=int, default=1)
    prune.add_argument("--learning-rate", type=float, default=1e-4)
    prune.add_argument("--output", type=Path, default=Path("weights/qa-minilm-squad2-pruned"))
    prune.add_argument("--data", type=Path)

    stages.add_parser("sweep-qa", help="accuracy/latency of QA pruning sparsities (before recovery)")

    build = stages.add_parser("build", help="build variants: ONNX export, graph optimization, INT8/FP16")
    build.add_argument("--task", choices=("qa", "generation"), required=True)
    build.add_argument("--preset", help="catalog preset (default: the task's offline default)")
    build.add_argument("--variant", default="optimized", help="variant to build (default optimized)")
    build.add_argument("--force", action="store_true", help="rebuild even when the manifest is up to date")
    build.add_argument("--no-eval", action="store_true", help="skip the accuracy measurement")
    build.add_argument("--strict", action="store_true", help="fail (publish nothing) when an accuracy gate is missed")

    report = stages.add_parser("report", help="measure every ready variant side by side; write reports/")
    report.add_argument("--task", choices=("qa", "generation"), action="append")
    report.add_argument("--rounds", type=int, help="timed rounds per variant")

    push = stages.add_parser("push", help="upload every ready variant to the Hub, one repo each, with cards")
    push.add_argument("--repo-prefix", required=True, help="ORG/NAME: repos ORG/NAME-<task>-<variant>")
    push.add_argument("--private", action="store_true")

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)

    if args.stage == "train-qa":
        from optimize.train_qa import TrainConfig, train
        config = TrainConfig(output=args.output, epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed,
                             answerable_first_epochs=args.answerable_first_epochs, null_fraction=args.null_fraction,
                             init_from=args.init_from, answerability_weight=args.answerability_weight)
        if args.data:
            config.data = args.data
        train(config)
    elif args.stage == "prune":
        from optimize.prune_qa import PruneConfig, run as prune_run
        from optimize.train_qa import TrainConfig
        # distillation: the teacher already knows "no answer", so no curriculum; half the null windows
        config = TrainConfig(output=args.output, epochs=args.epochs, learning_rate=args.learning_rate,
                             answerable_first_epochs=0)
        if args.data:
            config.data = args.data
        prune_run(Path("weights/qa-minilm-squad2"), PruneConfig(heads_kept=args.heads_kept, ffn_kept=args.ffn_kept), config)
    elif args.stage == "sweep-qa":
        from optimize.sweep_qa import run as sweep
        sweep()
    elif args.stage == "build":
        from models.catalog import default_preset, preset
        from models.errors import InputError, VariantUnavailable
        from optimize.build import build_onnx
        from optimize.gates import GateFailed
        from models.sources import resolve

        try:
            chosen = preset(args.preset) if args.preset else default_preset(args.task)
            variant = chosen.variant(args.variant)
            if variant.runtime == "onnxruntime":
                build_onnx(chosen, args.variant, force=args.force, evaluate=not args.no_eval, strict=args.strict)
            else:
                print(resolve(chosen, variant))
        except (InputError, VariantUnavailable, GateFailed) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    elif args.stage == "report":
        from dataclasses import replace

        from optimize.report import ReportConfig, run
        config = ReportConfig()
        if args.rounds:
            config = replace(config, qa_rounds=args.rounds, generation_rounds=args.rounds)
        run(config, tuple(args.task or ("qa", "generation")))
    elif args.stage == "push":
        from optimize.push import push as push_variants
        for repo in push_variants(args.repo_prefix, private=args.private):
            print(repo)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
