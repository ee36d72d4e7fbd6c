"""The training loop shared by QA fine-tuning and pruning recovery: length-grouped batches with
dynamic padding, AdamW with linear warm-up and decay, and checkpoints that survive a stop.

Checkpoints come in two sizes. The full one (weights, AdamW moments, schedule, RNGs) lives under
the artifacts root and continues a run exactly. The compact one (fp16 weights, schedule, RNGs)
is small enough to commit, so a CPU run of several hours can span sessions whose
artifacts are wiped: a run resumed from it restarts AdamW's moments and ramps the learning rate
back up over `REWARM_STEPS` steps (fresh moments make Adam's first steps sign-like and large).
"""
from __future__ import annotations

import logging
import math
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from models.errors import ConfigError
from optimize.evaluate.squad import collate
from optimize.train.allocator import log_advice

if TYPE_CHECKING:
    from optimize.train.finetune_qa import TrainConfig

log = logging.getLogger(__name__)
REWARM_STEPS = 100  # after a compact checkpoint: the learning rate ramps from 0 back to the schedule's


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def epoch_features(features: list[dict], epoch: int, config: TrainConfig, rng: random.Random) -> list[dict]:
    """The windows one epoch trains on (the curriculum: optimize/train/finetune_qa.py)."""
    spans = [f for f in features if f["start_positions"] != 0]
    nulls = [f for f in features if f["start_positions"] == 0]
    if epoch <= config.answerable_first_epochs:
        return spans
    return spans + rng.sample(nulls, int(len(nulls) * config.null_fraction))


def batches(features: list[dict], batch_size: int, rng: random.Random) -> list[list[dict]]:
    """Shuffle, sort by length inside mega-batches of 50 batches, shuffle the batches."""
    order = list(range(len(features)))
    rng.shuffle(order)
    mega = batch_size * 50
    out = []
    for chunk_start in range(0, len(order), mega):
        chunk = sorted(order[chunk_start:chunk_start + mega], key=lambda i: len(features[i]["input_ids"]))
        out.extend([[features[i] for i in chunk[b:b + batch_size]] for b in range(0, len(chunk), batch_size)])
    rng.shuffle(out)
    return out


def fit(model, features: list[dict], pad_id: int, config: TrainConfig,
        on_epoch: Callable[[int], float], loss_fn: Callable | None = None,
        checkpoint: Path | None = None, state: dict | None = None, stop_after: int | None = None,
        run_key: dict | None = None) -> list[float]:
    """AdamW with linear warm-up and decay over length-grouped batches; `on_epoch(epoch)` scores
    the model after each epoch (and may save it). Shared by fine-tuning and pruning recovery.

    `checkpoint`: every config.checkpoint_every steps and after each epoch's score, the weights,
    AdamW, schedule, RNGs and the caller's `state` (updated in place on resume) go there; a run
    that finds one continues from it to the same result as an uninterrupted run, so hours of CPU
    training survive a stop. `stop_after`: checkpoint and return after that many steps of this call.
    SIGTERM (`kill PID`) or Ctrl-C does the same after the step in flight, so a stopped job loses nothing.
    `run_key`: what else a checkpoint must share with the run that continues it (beyond `config`'s
    `resumable_key`), e.g. a pruning recipe."""
    from transformers import get_linear_schedule_with_warmup

    loss_fn = loss_fn or (lambda model, batch: model(**batch).loss)
    model.to(config.device)
    bf16 = config.bf16 or config.device == "cuda"
    optimizer = _adamw(model, config)
    rng = random.Random(config.seed)
    plan = [epoch_features(features, epoch, config, rng) for epoch in range(1, config.epochs + 1)]
    total_steps = sum(math.ceil(len(windows) / config.batch_size) for windows in plan)
    log.info("windows per epoch: %s", [len(windows) for windows in plan])
    log_advice(log)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total_steps), total_steps)
    progress = {"step": 0, "scores": [], "seconds": 0.0}
    key = {**config.resumable_key(), **(run_key or {}), "windows": str([len(windows) for windows in plan])}  # other data: another run
    if checkpoint and checkpoint.exists():
        progress = _resume(checkpoint, key, model, optimizer, scheduler, state)
    resumed_at, started = progress["step"], time.perf_counter()

    def save() -> None:
        if checkpoint:
            seconds = progress["seconds"] + time.perf_counter() - started
            _save_checkpoint(checkpoint, key, {**progress, "seconds": seconds}, model, optimizer, scheduler, state)

    # a stop after the step only where a checkpoint lets the same command continue; without one (a build's recovery)
    # Ctrl-C and SIGTERM stop at once, as anywhere else: a run cut short is never returned as trained
    stop, step, windows_done = _StopOnSigterm(active=checkpoint is not None), 0, 0
    for epoch in range(1, config.epochs + 1):
        model.train()
        for batch in batches(plan[epoch - 1], config.batch_size, rng):  # always drawn: keeps `rng` in step on resume
            step += 1
            if step <= resumed_at:
                continue
            with torch.autocast(config.device, dtype=torch.bfloat16, enabled=bf16):
                loss = loss_fn(model, collate(batch, pad_id, config.device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if progress.get("rewarm_from") is not None:  # fresh AdamW moments after a compact checkpoint
                ramp = min(1.0, (step - progress["rewarm_from"]) / REWARM_STEPS)
                for group, lr in zip(optimizer.param_groups, scheduler.get_last_lr()):
                    group["lr"] = lr * ramp
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            progress["step"], windows_done = step, windows_done + len(batch)
            if step % 25 == 0:
                elapsed = time.perf_counter() - started
                log.info("epoch %d step %d/%d loss %.3f  %.1f windows/s, ~%.0fs left", epoch, step, total_steps,
                         loss.item(), windows_done / elapsed, elapsed / (step - resumed_at) * (total_steps - step))
            if step % config.checkpoint_every == 0:
                save()
            if stop.requested or (stop_after is not None and step - resumed_at >= stop_after):
                stop.restore()
                save()
                log.info("stopped after step %d/%d; checkpoint %s (the same command continues)", step, total_steps, checkpoint)
                if stop.requested:  # a command stopped by a signal ends as interrupted, not as done (`a && b` stops)
                    raise TrainingStopped(stop.signum, f"training stopped after step {step}/{total_steps}; checkpoint "
                                                       f"{checkpoint}: run the same command to continue")
                return progress["scores"]
        if len(progress["scores"]) < epoch:
            model.eval()
            progress["scores"].append(on_epoch(epoch))
            save()
    stop.restore()
    if state is not None:
        state["train_seconds"] = round(progress["seconds"] + time.perf_counter() - started)
    return progress["scores"]


def _adamw(model, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW without weight decay on biases and layer norms."""
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": config.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.learning_rate)


class TrainingStopped(KeyboardInterrupt):
    """A run stopped by SIGTERM or Ctrl-C after its checkpoint: the command says how to continue and exits 128 +
    the signal's number, as a process the signal had ended would."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


class _StopOnSigterm:
    """A SIGTERM or a Ctrl-C while training asks for a checkpoint after the current step (main thread only: Python
    delivers signals there); a second Ctrl-C stops at once. Ctrl-C had stopped mid-step, losing every step since the
    last checkpoint."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, active: bool = True) -> None:
        self.requested, self.signum = False, 0
        self.previous: dict = {}
        if active and threading.current_thread() is threading.main_thread():
            self.previous = {signum: signal.signal(signum, self._request) for signum in self.SIGNALS}

    def _request(self, signum, frame) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        log.info("%s: stopping after this step with a checkpoint%s", signal.Signals(signum).name,
                 " (Ctrl-C again stops at once)" if signum == signal.SIGINT else "")
        self.requested, self.signum = True, signum

    def restore(self) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)
        self.previous = {}


def _save_checkpoint(path: Path, key: dict, progress: dict, model, optimizer, scheduler,
                     state: dict | None) -> None:
    payload = {"config": key, "progress": progress, "model": model.state_dict(),
               "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
               "torch_rng": torch.get_rng_state(), "state": state}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(payload, partial)
    partial.replace(path)


ADDED_KEYS = ("windows", "teacher_sha256")  # run keys added after checkpoints were committed


def _resume(path: Path, key: dict, model, optimizer, scheduler, state: dict | None) -> dict:
    payload = torch.load(path, weights_only=False)
    saved = payload["config"]  # a checkpoint written before a key was added is compared without it
    if saved != (asked := {name: value for name, value in key.items() if name in saved or name not in ADDED_KEYS}):
        differ = sorted(name for name in {*saved, *asked} if saved.get(name) != asked.get(name))
        raise ConfigError(f"{path} was written by another training run (it differs in {', '.join(differ)}); delete it "
                          "to start over, or run with the same options to continue it.")
    model.load_state_dict({name: tensor.float() for name, tensor in payload["model"].items()})
    progress = dict(payload["progress"])
    if "optimizer" in payload:
        optimizer.load_state_dict(payload["optimizer"])
        progress.setdefault("rewarm_from", None)
    else:  # compact: AdamW starts over, ramped (REWARM_STEPS)
        progress["rewarm_from"] = progress["step"]
        log.info("compact checkpoint: AdamW moments restart, learning rate ramps back over %d steps", REWARM_STEPS)
    scheduler.load_state_dict(payload["scheduler"])
    torch.set_rng_state(payload["torch_rng"])
    for key, saved in (payload["state"] or {}).items():  # in place: the caller's callbacks hold these objects
        current = state.get(key) if state is not None else None
        if isinstance(current, list):
            current[:] = saved
        elif isinstance(current, dict):
            current.clear()
            current.update(saved)
        elif state is not None:
            state[key] = saved
    log.info("resumed at step %d (%.0f s of training behind it) from %s", payload["progress"]["step"],
             payload["progress"]["seconds"], path)
    return progress


def export_compact(checkpoint: Path, target: Path) -> Path:
    """The committable form of a full checkpoint: fp16 weights, schedule, RNGs and progress, no
    AdamW moments (a sixth of a full checkpoint's bytes)."""
    payload = torch.load(checkpoint, weights_only=False)
    payload.pop("optimizer", None)  # a compact checkpoint copied in from the repo has none
    payload["model"] = {name: tensor.half() if tensor.is_floating_point() else tensor
                        for name, tensor in payload["model"].items()}
    payload["progress"].pop("rewarm_from", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    torch.save(payload, partial)
    partial.replace(target)
    return target
