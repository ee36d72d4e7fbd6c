"""Issue 48 / the `pruned` promise: D2 (experiments/qa-pruned-spans) with the teacher's hidden states as a
second target, layer by layer (RULE.md). Resumable: the same command continues after a stop; its log is under
artifacts/train-jobs/. Validation only.

Why layers: a head-and-neuron cut keeps the hidden size (384), so each of the student's six layer outputs can be
pulled towards B3's own at the same depth with no projection. Logits alone (D1, D2) traded spans against
"no answer" within an epoch; the layer outputs carry both.

    PYTHONPATH=. python experiments/qa-pruned-layers/distil.py [--stop-after STEPS]
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import logging

import torch

from models.catalog import REPO_ROOT, artifacts_root
from optimize.prune.encoder import model_inputs
from optimize.train.recover_qa import EncoderRecoveryConfig, distillation_loss

LAYER_WEIGHT = 1.0


def _experiment(folder: str):
    spec = importlib.util.spec_from_file_location(f"{folder}_distil", REPO_ROOT / "experiments" / folder / "distil.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def layer_mismatch(student_hidden, teacher_hidden, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean over layers of ||h_student − h_teacher||² / ||h_teacher||² on real tokens: each layer counts the
    same whatever its scale (MiniLM's later layers are larger)."""
    tokens = attention_mask.unsqueeze(-1).float()
    ratios = [(((s.float() - t.float()) ** 2) * tokens).sum() / ((t.float() ** 2) * tokens).sum().clamp_min(1e-6)
              for s, t in zip(student_hidden[1:], teacher_hidden[1:])]
    return torch.stack(ratios).mean()


def layer_loss_fn(teacher, recovery: EncoderRecoveryConfig):
    """D2's loss (KL on start and end logits at T, plus the labels) + LAYER_WEIGHT × the layer mismatch."""
    def loss_fn(model, batch):
        batch = model_inputs(model, batch)
        with torch.inference_mode():
            teacher_out = teacher(**{k: v for k, v in batch.items() if not k.endswith("_positions")},
                                  output_hidden_states=True)
        teacher_out.start_logits, teacher_out.end_logits = teacher_out.start_logits.clone(), teacher_out.end_logits.clone()
        teacher_hidden = [h.clone() for h in teacher_out.hidden_states]
        student_out = model(**batch, output_hidden_states=True)
        return (distillation_loss(student_out, teacher_out, batch, recovery.temperature, recovery.alpha)
                + LAYER_WEIGHT * layer_mismatch(student_out.hidden_states, teacher_hidden, batch["attention_mask"]))
    return loss_fn


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-after", type=int, metavar="STEPS")
    d1, d2 = _experiment("qa-pruned-distil-b3"), _experiment("qa-pruned-spans")
    train_config = dataclasses.replace(d1.config(), output=artifacts_root() / "candidates" / "qa-minilm-squad2-pruned-layers")
    result = d1.main(parser.parse_args().stop_after, train_config, d2.span_sample, loss_fn_factory=layer_loss_fn,
                     recipe=f" + {LAYER_WEIGHT} x the layer outputs' relative squared error")
    print({k: v for k, v in result.items() if k in ("stopped", "checkpoint", "validation", "validation_score")})
