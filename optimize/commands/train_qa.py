"""`python -m optimize train-qa`: fine-tune all-MiniLM-L6-v2 for SQuAD 2.0 extractive QA (a resumable
job; its recipe and why: optimize/train/finetune_qa.py)."""
from __future__ import annotations

import argparse
from pathlib import Path

from models.catalog import REPO_ROOT
from optimize.commands.common import data_options, positive_int, writable_output

NAME = "train-qa"
HELP = "fine-tune all-MiniLM-L6-v2 on SQuAD 2.0 (held-out articles)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, help="SQuAD 2.0 JSON (default ../shared/data/squad-v2-dev/dev-v2.0.json)")
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "weights/qa-minilm-squad2",
                        help="default weights/qa-minilm-squad2, the shipped baseline: replaced once the run is done "
                             "(it trains in <output>.partial until then)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--answerable-first-epochs", type=int, default=1)
    parser.add_argument("--null-fraction", type=float, default=0.5)
    parser.add_argument("--answerability-weight", type=float, default=0.0,
                        help="weight of the span-vs-null margin loss (trains the no-answer decision directly)")
    parser.add_argument("--init-from", type=Path, help="continue from these weights (a second stage)")
    parser.add_argument("--negatives-share", type=float, default=0.3,
                        help="share of answerable questions also paired with another paragraph of their article (unanswerable)")
    parser.add_argument("--removed-answer-share", type=float, default=0.0,
                        help="share of answerable questions also asked of their paragraph with the answer's sentences "
                             "taken out (unanswerable, on topic)")
    parser.add_argument("--short-context-share", type=float, default=0.0,
                        help="share of answerable questions also asked of their answer's sentence with one sentence "
                             "either side (answerable, short)")
    parser.add_argument("--swapped-name-share", type=float, default=0.0,
                        help="share of answerable questions also asked with a name swapped for one from another article "
                             "that the paragraph lacks (unanswerable, on topic)")
    data = parser.add_mutually_exclusive_group()  # each sets the extra data: together, one had silently won
    data.add_argument("--no-extra-data", action="store_true", help="train on the dev file's training articles only")
    data.add_argument("--full-data", action="store_true",
                        help="add the whole SQuAD 1.1 training set and tune the threshold on four validation articles "
                             "(squad.WIDE_VALIDATION); the test articles stay the same")
    data.add_argument("--answerability-stage", action="store_true",
                        help="a second stage for a --full-data model (with --init-from): the SQuAD 2.0 files only, where "
                             "the real unanswerable questions are, validated on the same four articles")
    parser.add_argument("--more-negatives", action="store_true",
                        help="also train on the 13 more SQuAD 2.0 dev articles (../shared/data/squad-v2-dev-more: "
                             "1,964 real unanswerable questions)")
    parser.add_argument("--no-test", action="store_true",
                        help="score validation only: the test articles are scored once, by remeasure-qa, for a "
                             "candidate its validation rule has chosen")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-bf16", action="store_true", help="no bf16 autocast even where the CPU has bf16 instructions")
    parser.add_argument("--save-compact", action="store_true",
                        help="write the running job's last checkpoint to weights/train-jobs/ (fp16, no AdamW state) and exit")
    parser.add_argument("--stop-after", type=positive_int, metavar="STEPS",
                        help="checkpoint and stop after this many steps of this run; the same command continues "
                              "(checkpoint and log under artifacts/train-jobs/<output name>/)")


def run(args: argparse.Namespace) -> int:
    from models.errors import InputError
    from optimize.train.finetune_qa import TrainConfig, train

    if args.answerability_stage and args.init_from is None and not args.save_compact:
        raise InputError("--answerability-stage is a second stage: give the first stage's weights with --init-from")
    config = TrainConfig(output=writable_output(args.output), epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed,
                         answerable_first_epochs=args.answerable_first_epochs, null_fraction=args.null_fraction,
                         init_from=args.init_from, answerability_weight=args.answerability_weight,
                         negatives_share=args.negatives_share, removed_answer_share=args.removed_answer_share,
                         swapped_name_share=args.swapped_name_share, short_context_share=args.short_context_share,
                         batch_size=args.batch_size, threads=args.threads)
    if args.no_extra_data:
        config.extra_data = ()
    data_options(config, args)
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
    return 0
