"""`python -m optimize prune`: structured pruning, then distillation back from the baseline: QA
(heads, FFN neurons, layers of the encoder; optimize/train/recover_qa.py) or generation (decoder layers
and FFN neurons, LoRA distillation; optimize/train/recover_decoder.py). Both are resumable jobs."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from models.catalog import REPO_ROOT
from optimize.commands.common import data_options, flags_given, positive_int, writable_output

NAME = "prune"
HELP = "structured pruning + distillation recovery"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=("qa", "generation"), default="qa")
    parser.add_argument("--heads-kept", type=int, default=8, help="QA: attention heads kept per layer (of 12)")
    parser.add_argument("--ffn-kept", type=int, help="FFN neurons kept per layer, of 1536 (default: QA 1024, generation 1536)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (QA: two candidates can run side by side)")
    parser.add_argument("--qa-layers-dropped", type=int, default=0,
                        help="QA: encoder layers removed (those whose absence costs the least calibration loss)")
    parser.add_argument("--layers-dropped", type=int, default=6,
                        help="generation: decoder layers removed, of 30 (default 6, as the shipped `pruned`)")
    parser.add_argument("--ffn-pruned-share", type=float, default=0.0,
                        help="generation: share of all FFN neurons removed, ranked across layers (overrides --ffn-kept)")
    parser.add_argument("--epochs", type=int, default=1, help="QA recovery epochs")
    parser.add_argument("--steps", type=int, default=300, help="generation recovery steps (LoRA distillation)")
    parser.add_argument("--learning-rate", type=float, help="recovery learning rate (default: QA 1e-4, generation 1e-3)")
    parser.add_argument("--skip-before", action="store_true", help="generation: skip measuring before recovery")
    parser.add_argument("--stop-after", type=positive_int, metavar="STEPS",
                        help="checkpoint and stop after this many recovery steps; the same command continues "
                        "(checkpoint and log under artifacts/recovery-jobs/ or artifacts/train-jobs/<output name>/)")
    parser.add_argument("--output", type=Path, help="default weights/<preset>-pruned")
    parser.add_argument("--data", type=Path)
    parser.add_argument("--baseline", type=Path, default=REPO_ROOT / "weights/qa-minilm-squad2",
                        help="QA: the model pruned and the distillation teacher")
    parser.add_argument("--full-data", action="store_true",
                        help="QA: distil on the whole SQuAD 1.1 training set too, validate on 4 articles (as train-qa --full-data)")
    parser.add_argument("--train-share", type=float, default=1.0,
                        help="QA: distil on this seeded share of the windows, in (0, 1] (default 1)")
    parser.add_argument("--batch-size", type=int, default=16, help="QA recovery batch size")
    parser.add_argument("--no-bf16", action="store_true", help="QA: no bf16 autocast")
    parser.add_argument("--freeze-word-embeddings", action="store_true",
                        help="QA: keep the baseline's word embeddings (a lent GPU's trip back then skips them)")
    parser.add_argument("--attention-dropout", type=float,
                        help="QA: the student's attention dropout during recovery (default: the baseline's; 0 trains "
                             "about twice as fast on CPU)")
    parser.add_argument("--no-test", action="store_true",
                        help="QA: a candidate: validation only, unpublished in <output>.partial; the test articles are "
                             "scored once, by remeasure-qa, for a candidate its validation rule has chosen")
    parser.add_argument("--save-compact", action="store_true",
                        help="QA: write the running job's compact checkpoint under weights/train-jobs/ (to commit) and exit")


QA_ONLY = ("heads_kept", "qa_layers_dropped", "epochs", "baseline", "full_data", "train_share", "batch_size", "no_bf16",
           "freeze_word_embeddings", "attention_dropout", "no_test", "save_compact", "data")
GENERATION_ONLY = ("layers_dropped", "ffn_pruned_share", "steps", "skip_before")


def run(args: argparse.Namespace) -> int:
    from models.errors import InputError

    if ignored := flags_given(args, add_arguments, QA_ONLY if args.task == "generation" else GENERATION_ONLY):
        raise InputError(f"not for --task {args.task}: {', '.join(ignored)}")  # `--save-compact` had started recovery
    writable_output(args.output)
    if not 0 < args.train_share <= 1:  # 0 had failed deep in pruning with an AttributeError
        raise InputError(f"--train-share {args.train_share}: use a share in (0, 1]")
    if args.learning_rate is not None and not args.learning_rate > 0:  # 0 was read as "the default"
        raise InputError(f"--learning-rate {args.learning_rate}: use a rate above 0")
    if args.task == "qa":
        from models.sources import model_folder

        model_folder(args.baseline)  # a wrong path had been taken for a Hub id, in a traceback
    return _generation(args) if args.task == "generation" else _qa(args)


def _generation(args: argparse.Namespace) -> int:
    from optimize.prune import decoder
    from optimize.train import recover_decoder

    result = recover_decoder.run(
        decoder.DecoderPruneConfig(layers_dropped=args.layers_dropped,
                                   ffn_kept=1536 if args.ffn_kept is None else args.ffn_kept,
                                   ffn_pruned_share=args.ffn_pruned_share),
        recover_decoder.DecoderRecoveryConfig(steps=args.steps, threads=args.threads,
                                              learning_rate=1e-3 if args.learning_rate is None else args.learning_rate),
        args.output or REPO_ROOT / "weights/generation-smollm2-pruned", measure_before=not args.skip_before,
        stop_after=args.stop_after)
    if "stopped_at_step" in result:
        print(f"recovery stopped at step {result['stopped_at_step']}/{result['steps']}; checkpoint {result['checkpoint']}. "
              "Run the same command to continue.")
    else:
        print({k: result[k] for k in ("layers_kept", "before_recovery", "after_recovery")})
    return 0


def _qa(args: argparse.Namespace) -> int:
    from optimize.evaluate import squad
    from optimize.evaluate.accuracy import threshold_split
    from optimize.evaluate.gates import GateFailed
    from optimize.prune.encoder import PruneConfig
    from optimize.train.recover_qa import EncoderRecoveryConfig
    from optimize.train.finetune_qa import TrainConfig, save_compact
    from optimize.train.recover_qa import run as prune_run

    # distillation: the teacher already knows "no answer", so no curriculum; half the null windows
    config = TrainConfig(output=args.output or REPO_ROOT / "weights/qa-minilm-squad2-pruned", epochs=args.epochs,
                         learning_rate=1e-4 if args.learning_rate is None else args.learning_rate,
                         answerable_first_epochs=0, threads=args.threads,
                         batch_size=args.batch_size, score_test=not args.no_test)
    data_options(config, args)
    if squad.is_dev_file(config.data):  # named or not: the baseline's own split, whose validation articles must not
        config.split = threshold_split(args.baseline)  # teach the student (its promise is measured on them)
    if args.save_compact:
        print(f"compact checkpoint (commit it to continue in a fresh clone): {save_compact(config)}")
        return 0
    try:
        result = prune_run(args.baseline, PruneConfig(heads_kept=args.heads_kept, ffn_kept=1024 if args.ffn_kept is None else args.ffn_kept,
                                                      layers_dropped=args.qa_layers_dropped),
                           config, EncoderRecoveryConfig(freeze_word_embeddings=args.freeze_word_embeddings,
                                                         attention_dropout=args.attention_dropout),
                           train_share=args.train_share, stop_after=args.stop_after)
    except GateFailed as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if result.get("stopped"):
        print(f"recovery stopped; checkpoint {result['checkpoint']}. Run the same command to continue.")
    elif args.no_test:
        print(f"candidate (validation only, not published): {result['candidate']}; validation {result['validation']}")
    return 0
