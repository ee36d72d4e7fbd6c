"""D4 (RULE-D4.md): D3's loss (logits, labels and B3's layer outputs) on D3's data, at lr 1e-4 for two epochs, the
loop's validation picking the epoch. Resumable like D3; validation only.

    PYTHONPATH=. python experiments/qa-pruned-layers/d4.py [--stop-after STEPS]
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from models.catalog import artifacts_root

sys.path.insert(0, str(Path(__file__).parent))
import distil as d3  # noqa: E402 - D3's script beside this one (an experiment folder, not a package)

LEARNING_RATE, EPOCHS = 1e-4, 2


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-after", type=int, metavar="STEPS")
    d1, d2 = d3._experiment("qa-pruned-distil-b3"), d3._experiment("qa-pruned-spans")
    train_config = dataclasses.replace(d1.config(), learning_rate=LEARNING_RATE, epochs=EPOCHS,
                                       output=artifacts_root() / "candidates" / "qa-minilm-squad2-pruned-layers-d4")
    result = d1.main(parser.parse_args().stop_after, train_config, d2.span_sample, loss_fn_factory=d3.layer_loss_fn,
                     recipe=f" + {d3.LAYER_WEIGHT} x the layer outputs' relative squared error")
    print({k: v for k, v in result.items() if k in ("stopped", "checkpoint", "validation", "validation_score")})
