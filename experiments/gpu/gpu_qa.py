"""QA training sweep on a lent GPU (the device tool: /work/.library/device/README.md), not part of the demo or tests.

Trains the QA baseline from all-MiniLM-L6-v2 under several recipes (same data, split and held-out
test articles as `python -m optimize train-qa`), keeps the one with the best *validation* score
(`train_qa.validation_score`: mean of SQuAD 2.0 F1 and forced-span HasAns F1), prunes it and
recovers the pruned model by distillation, then writes both to a tar for the trip back.
Usage on the device: python experiments/gpu/gpu_qa.py MINILM_DIR WORK_DIR SECONDS, then
python experiments/gpu/gpu_qa.py pack WORK_DIR $OUT
"""
from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

RECIPES = (  # (name, overrides of TrainConfig)
    ("e4-lr1e-4-af1", dict(epochs=4, learning_rate=1e-4, batch_size=32, answerable_first_epochs=1, null_fraction=0.5)),
    ("e4-lr1e-4-af1-aw1", dict(epochs=4, learning_rate=1e-4, batch_size=32, answerable_first_epochs=1, null_fraction=0.5,
                               answerability_weight=1.0)),
    ("e6-lr7e-5-aw1", dict(epochs=6, learning_rate=7e-5, batch_size=32, answerable_first_epochs=1, null_fraction=1.0,
                           answerability_weight=1.0)),
    ("e3-lr5e-5-bs16", dict(epochs=3, learning_rate=5e-5, batch_size=16, answerable_first_epochs=0, null_fraction=1.0)),
    ("e8-lr1e-4-aw0.5", dict(epochs=8, learning_rate=1e-4, batch_size=32, answerable_first_epochs=1, null_fraction=0.5,
                             answerability_weight=0.5)),
    ("e4-lr1e-4-af1-aw1-seed43", dict(epochs=4, learning_rate=1e-4, batch_size=32, answerable_first_epochs=1,
                                      null_fraction=0.5, answerability_weight=1.0, seed=43)),
)


def main(minilm: Path, out: Path, budget_s: float) -> None:
    import optimize.train.finetune_qa as train_qa
    from optimize.prune import encoder as prune_qa

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    started, sweep = time.perf_counter(), []
    for name, overrides in RECIPES:
        if time.perf_counter() - started > budget_s * 0.55:
            break
        config = replace(train_qa.TrainConfig(output=out / f"qa-{name}", threads=16, base=minilm), **overrides)
        result = train_qa.train(config)
        best = next(h for h in result["history"] if h["epoch"] == result["best_epoch"])
        sweep.append({"recipe": name, **overrides, "validation_score": (best["overall_f1"] + best["forced_HasAns_f1"]) / 2,
                      "validation": best, "held_out": result["held_out"], "train_seconds": result["train_seconds"]})
        logging.info("SWEEP %s", json.dumps(sweep[-1]))
        (out / "sweep.json").write_text(json.dumps(sweep, indent=2))
    chosen = max(sweep, key=lambda row: row["validation_score"])
    baseline_dir = out / f"qa-{chosen['recipe']}"
    logging.info("chosen by validation: %s", chosen["recipe"])
    epochs = 6 if time.perf_counter() - started < budget_s * 0.6 else 3
    pruned_config = replace(train_qa.TrainConfig(output=out / "qa-pruned", threads=16, base=minilm), epochs=epochs,
                            learning_rate=1e-4, batch_size=32, answerable_first_epochs=0, null_fraction=1.0)
    try:
        pruned = prune_qa.run(baseline_dir, prune_qa.PruneConfig(heads_kept=10, ffn_kept=1280), pruned_config,
                              prune_qa.DecoderRecoveryConfig(freeze_word_embeddings=True))
    except Exception as error:  # a gate miss leaves the staging folder: bring it back with the reason
        logging.exception("pruned: %s", error)
        pruned = {"error": str(error)}
    (out / "sweep.json").write_text(json.dumps({"sweep": sweep, "chosen": chosen["recipe"], "pruned": pruned,
                                                "seconds": round(time.perf_counter() - started)}, indent=2))




def pack(out: Path, destination: Path, chunk_mb: int = 15) -> None:
    """What comes back: the chosen baseline, the pruned model without its word embeddings (they
    are the baseline's, frozen during recovery), the sweep; one tar split in chunks under 16 MiB."""
    import tarfile

    from safetensors.torch import load_file, save_file

    summary = json.loads((out / "sweep.json").read_text())
    pruned_dir = next(p for p in (out / "qa-pruned", out / "qa-pruned.partial") if p.exists())
    weights = load_file(pruned_dir / "model.safetensors")
    weights.pop("bert.embeddings.word_embeddings.weight")
    save_file(weights, pruned_dir / "model-without-word-embeddings.safetensors")
    archive = out / "qa.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(out / "sweep.json", "sweep.json")
        for name in ("config.json", "model.safetensors", "qa_config.json", "training.json"):
            tar.add(out / f"qa-{summary['chosen']}" / name, f"baseline/{name}")
        for name in ("config.json", "model-without-word-embeddings.safetensors", "qa_config.json", "training.json"):
            tar.add(pruned_dir / name, f"pruned/{name}")
    data = archive.read_bytes()
    step = chunk_mb * 1024 * 1024
    for index in range(0, len(data), step):
        (destination / f"qa.tar.{index // step:02d}").write_bytes(data[index:index + step])


if __name__ == "__main__":
    if sys.argv[1] == "pack":
        pack(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]))
