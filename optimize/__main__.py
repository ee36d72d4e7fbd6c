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

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)

    if args.stage == "train-qa":
        from optimize.train_qa import TrainConfig, train
        config = TrainConfig(output=args.output, epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed)
        if args.data:
            config.data = args.data
        train(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
