"""Recovery of a pruned QA encoder by distillation from the unpruned model: `python -m optimize prune
--task qa` prunes the QA baseline (optimize/prune/encoder.py) and recovers it as a resumable job;
`prune_and_recover` does the same, briefly, for a user's model inside `optimize build`.

On 2 cores a recovery on the whole SQuAD 1.1 training set takes hours (a teacher forward pass and
a student training step per batch), so it runs like `train-qa`: checkpoints under the artifacts
root, a committable compact checkpoint, SIGTERM stops it after the step in flight, and the same
command continues. `train_share` distils on a seeded sample of the windows when hours matter more
than the last points. The student is published only when it keeps the pruning gate of its teacher.
"""
from __future__ import annotations

import json
import logging
import math
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from models.manifest import source_fingerprint
from optimize.prune.encoder import PruneConfig, load_baseline, model_inputs, pruned_copy, with_fused_attention

log = logging.getLogger(__name__)


def distillation_loss(student_out, teacher_out, batch, temperature: float, alpha: float) -> torch.Tensor:
    """alpha × KL(teacher || student) on start and end logits at temperature T, (1 − alpha) × labels."""
    kl = nn.KLDivLoss(reduction="batchmean")
    soft = 0.0
    for name in ("start_logits", "end_logits"):
        mask = batch["attention_mask"] == 0
        student_logits = getattr(student_out, name).masked_fill(mask, -1e4)
        teacher_logits = getattr(teacher_out, name).masked_fill(mask, -1e4)
        soft = soft + kl(torch.log_softmax(student_logits / temperature, -1),
                         torch.softmax(teacher_logits / temperature, -1)) * temperature**2 / 2
    return alpha * soft + (1 - alpha) * student_out.loss


@dataclass(frozen=True)
class EncoderRecoveryConfig:
    temperature: float = 2.0
    alpha: float = 0.7  # weight of the teacher's soft targets vs the labels
    freeze_word_embeddings: bool = False  # keep the baseline's: a GPU trip back then carries them once
    attention_dropout: float | None = None  # the student's attention dropout; None keeps the baseline's (0.1 for BERT)


def distil_loss_fn(teacher, recovery: EncoderRecoveryConfig):
    """The student's loss against the frozen teacher on the same batch (inputs the model takes)."""
    def loss_fn(model, batch):
        batch = model_inputs(model, batch)
        with torch.inference_mode():
            teacher_out = teacher(**{k: v for k, v in batch.items() if not k.endswith("_positions")})
        teacher_out.start_logits, teacher_out.end_logits = teacher_out.start_logits.clone(), teacher_out.end_logits.clone()
        return distillation_loss(model(**batch), teacher_out, batch, recovery.temperature, recovery.alpha)
    return loss_fn


def recovery_train_config(baseline_dir: Path, output: Path, spec):
    """One epoch of the recovery budget on the dev file's training articles of the split the build will gate the
    pruned model on (`threshold_split`: its verifier, threshold and promise are read on that split's validation
    articles, so none of them may teach it), or on `spec.data` (another file: every article trains)."""
    from optimize.evaluate import squad
    from optimize.evaluate.accuracy import threshold_split
    from optimize.train.finetune_qa import TrainConfig

    if spec.data and not squad.is_dev_file(spec.data):  # the default split read the file's first twelve articles
        squad.check_recovery_data(Path(spec.data))
        every = squad.ArticleSplit(train=tuple(range(len(squad.load_articles(Path(spec.data))))), validation=(), test=())
        where = {"data": Path(spec.data), "extra_data": (), "split": every}
    else:
        where = {"split": threshold_split(baseline_dir)}
    return TrainConfig(output=output, epochs=1, answerable_first_epochs=0, warmup_ratio=0.1, **where)


def prune_and_recover(baseline_dir: Path, output: Path, spec, progress=log.info) -> dict:
    """A user's model (`spec`: models.catalog.PruneSpec, shares of heads and FFN neurons kept):
    prune it, distil it from itself for `spec.recovery_steps` steps on the shared training articles
    (or `spec.data`), save it to `output`. The build measures and gates it afterwards, as every variant."""
    from transformers import AutoTokenizer

    from models.errors import ConfigError
    from optimize.evaluate import squad
    from optimize.prune.encoder import PruneConfig, encoder_layers, head_count, layout, module
    from optimize.train.finetune_qa import training_examples, training_features
    from optimize.train.loop import epoch_features, fit, seed_everything

    train_config = recovery_train_config(baseline_dir, output, spec)
    seed_everything(train_config.seed)
    teacher = load_baseline(baseline_dir).eval()
    if spec.layers_dropped >= len(encoder_layers(teacher)):  # it had removed every layer, then gated what was left
        raise ConfigError(f"the model has {len(encoder_layers(teacher))} layers; asked to drop {spec.layers_dropped}")
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    examples = training_examples(train_config, squad.load_articles(train_config.data, train_config.split))
    # one epoch is exactly the recovery budget: the schedule warms up and decays within it
    examples = random.Random(train_config.seed).sample(examples, min(len(examples), spec.recovery_steps * train_config.batch_size))
    features = training_features(tokenizer, examples, train_config.qa)
    # what fit steps through: the examples' windows, less the null windows an epoch leaves out (it had recorded the
    # budget asked, some fifth more steps than it ran)
    steps = math.ceil(len(epoch_features(features, 1, train_config, random.Random(train_config.seed))) / train_config.batch_size)
    heads, ffn = head_count(teacher), module(encoder_layers(teacher)[0], layout(teacher).ffn_out).in_features
    heads_kept = heads if layout(teacher).heads_fixed else max(1, round(spec.heads_kept * heads))
    config = PruneConfig(heads_kept=heads_kept, ffn_kept=max(1, round(spec.ffn_kept * ffn)),
                         layers_dropped=spec.layers_dropped)
    progress(f"pruning to {config.heads_kept}/{heads} heads, {config.ffn_kept}/{ffn} FFN neurons per layer, "
             f"{config.layers_dropped} layers dropped; recovering for {steps} steps")
    student = with_fused_attention(pruned_copy(baseline_dir, features, tokenizer.pad_token_id, config))
    fit(student, features, tokenizer.pad_token_id, train_config, lambda epoch: 0.0,
        distil_loss_fn(with_fused_attention(teacher).eval().to(train_config.device), EncoderRecoveryConfig()))  # beside the student
    student.eval().save_pretrained(output)
    tokenizer.save_pretrained(output)
    return {"heads_kept": config.heads_kept, "heads": heads, "ffn_kept": config.ffn_kept, "ffn": ffn,
            "layers": student.config.to_dict().get(layout(student).layers_key), "recovery_steps": steps}


def run(baseline_dir: Path, prune_config: PruneConfig, train_config, recovery: EncoderRecoveryConfig | None = None,
        train_share: float = 1.0, stop_after: int | None = None) -> dict:
    """Prune the baseline, recover on the training articles, score the held-out articles, publish
    when gated. Returns {"stopped": True, ...} when stopped early (the same call continues). With
    `train_config.score_test` off it is a candidate: validation only, left in the staging folder."""
    from dataclasses import replace

    from optimize.train.finetune_qa import compact_file, resumable_job, staging_dir

    recovery = recovery or EncoderRecoveryConfig()

    published = Path(train_config.output)
    with resumable_job(published) as checkpoint:
        result = _run(Path(baseline_dir), prune_config, replace(train_config, output=staging_dir(published)),
                      recovery, train_share, stop_after, checkpoint)
    if result.get("stopped"):
        return result
    compact_file(published).unlink(missing_ok=True)
    if not train_config.score_test:  # a candidate: its validation rule, not this gate, decides before any test look
        return {**result, "candidate": str(staging_dir(published))}
    publish_if_gated(staging_dir(published), published, baseline_dir, result, train_config)
    from optimize.publish.model_card import write_qa_card
    write_qa_card(published)
    return result


def _run(baseline_dir: Path, prune_config: PruneConfig, train_config, recovery: EncoderRecoveryConfig, train_share: float,
         stop_after: int | None, checkpoint: Path) -> dict:
    from transformers import AutoConfig, AutoTokenizer

    from optimize.evaluate import squad
    from optimize.evaluate.squad_metrics import evaluate_model
    from optimize.train.finetune_qa import finish, training_examples, training_features, validation_tracker
    from optimize.train.loop import epoch_features, fit, seed_everything

    torch.set_num_threads(train_config.threads)
    seed_everything(train_config.seed)
    prune_config.check_fits(AutoConfig.from_pretrained(baseline_dir))
    articles = squad.load_articles(train_config.data, train_config.split)
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    features = training_features(tokenizer, training_examples(train_config, articles), train_config.qa)
    if train_share < 1.0:
        features = random.Random(train_config.seed).sample(features, round(len(features) * train_share))
    validation_data = squad.examples(articles, train_config.split.validation)
    teacher = with_fused_attention(load_baseline(baseline_dir)).eval().to(train_config.device)
    # the same pruning on a resume (seeded calibration); the checkpoint then replaces the weights
    student = with_fused_attention(pruned_copy(baseline_dir, features, tokenizer.pad_token_id, prune_config),
                                   recovery.attention_dropout)
    student.get_input_embeddings().requires_grad_(not recovery.freeze_word_embeddings)
    history, best, lost = [], {}, []
    state = {"history": history, "best": best, "before": None, "kept_weights_lost": lost}
    if not checkpoint.exists():
        state["before"] = round(evaluate_model(student, tokenizer, validation_data, train_config.qa)["metrics"]["overall_f1"], 2)
        log.info("pruned to %d heads, %d FFN neurons per layer, %d layers dropped; validation F1 before recovery %.2f",
                 prune_config.heads_kept, prune_config.ffn_kept, prune_config.layers_dropped, state["before"])
    log.info("recovery: %d windows (%.0f %% of the training windows), teacher %s", len(features), 100 * train_share,
             baseline_dir)
    run_key = {"teacher": str(baseline_dir), "prune": str(prune_config), "recovery": str(recovery),
               "train_share": str(train_share), "teacher_sha256": source_fingerprint(baseline_dir)}  # a retrained one
    scores = fit(student, features, tokenizer.pad_token_id, train_config,
                 validation_tracker(student, tokenizer, validation_data, train_config, history, best, lost),
                 distil_loss_fn(teacher, recovery), checkpoint=checkpoint, state=state, stop_after=stop_after,
                 run_key=run_key)
    if len(scores) < train_config.epochs:
        return {"stopped": True, "checkpoint": str(checkpoint)}
    train_seconds = state["train_seconds"]
    trained = sum(len(epoch_features(features, e, train_config, random.Random(0))) for e in range(1, train_config.epochs + 1))
    extra = {"base_model": f"{baseline_dir} (pruned: {prune_config.heads_kept} heads, {prune_config.ffn_kept} FFN "
                           f"neurons per layer, {student.config.num_hidden_layers} layers; recovered by distillation, "
                           f"T={recovery.temperature}, alpha={recovery.alpha})",
             "prune": prune_config.__dict__, "validation_f1_before_recovery": state["before"],
             "train_windows": len(features), "train_share": train_share, "train_seconds": train_seconds,
             "windows_per_second": round(trained / max(train_seconds, 1), 1),
             "threads": train_config.threads, "device": train_config.device,
             "word_embeddings_frozen": recovery.freeze_word_embeddings, **({"kept_weights_lost": lost} if lost else {})}
    return finish(train_config.output, tokenizer, train_config, best, history, articles, extra)


def publish_if_gated(staging: Path, published: Path, baseline_dir: Path, result: dict, train_config) -> None:
    """Pruning promises a smaller model of measured quality: it is published only when it stays
    within the gate of the baseline on SQuAD 2.0 F1 *and* forced-span F1 on validation, so abstaining
    cannot pass. A miss leaves the staging folder for inspection and publishes nothing."""
    from optimize.evaluate.gates import QA_GATED, beside_reference, check
    from optimize.train.finetune_qa import held_out_metrics

    baseline = json.loads((Path(baseline_dir) / "training.json").read_text())["held_out"]
    if not all(key in baseline for key in QA_GATED):  # scored before the gates read validation (issue 48)
        baseline = held_out_metrics(Path(baseline_dir), train_config)
    check(str(published), "qa", "torch", beside_reference(result["held_out"], baseline),
          advice=f"Prune less (more heads or FFN neurons kept, fewer layers dropped) or recover longer "
                 f"(--epochs, --full-data); the student stays in {staging} for inspection.")
    shutil.rmtree(published, ignore_errors=True)
    Path(staging).rename(published)
