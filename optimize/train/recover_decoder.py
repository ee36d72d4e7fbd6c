"""Recovery of a pruned decoder: LoRA adapters (plus norms) distilled from the unpruned model on
logits and hidden states, as a resumable job; `run` prunes, recovers, measures and saves the plan
and delta that `optimize.prune.decoder.assemble` rebuilds the model from."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from models.catalog import REPO_ROOT
from models.errors import ConfigError
from optimize.evaluate.continuations import greedy_answers
from optimize.prune.decoder import DecoderPruneConfig, ffn_widths, importance, plan, prune_with_plan, save_recovery
from optimize.train.allocator import log_advice

if TYPE_CHECKING:
    from models.runners import Runner

log = logging.getLogger(__name__)


def distillation_loss(student_logits, teacher_logits, temperature: float = 1.0) -> torch.Tensor:
    """KL(teacher || student) over the vocabulary at every position."""
    return nn.functional.kl_div(
        torch.log_softmax(student_logits / temperature, -1).flatten(0, 1),
        torch.softmax(teacher_logits / temperature, -1).flatten(0, 1), reduction="batchmean",
    ) * temperature**2


# --- recovery: LoRA adapters + RMSNorm gains, distilled from the unpruned model -----------------
# Why LoRA and not full fine-tuning: the recovered weights are data-dependent and must be committed
# (a fresh clone cannot retrain them), and committed weights are capped at 150 MB. The pruning plan
# (dropped layers, kept neurons) plus rank-r adapters are a few MB; the pruned model is assembled
# from the package's GGUF baseline at build time.

class LoRALinear(nn.Module):
    """y = W x + (B A x) · alpha / r, with W frozen."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.scale = alpha / rank
        device = base.weight.device
        self.lora_A = nn.Parameter(torch.randn(rank, base.in_features, device=device) / base.in_features**0.5)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scale

    def merged(self) -> nn.Linear:
        self.base.weight.data += (self.lora_B @ self.lora_A).to(self.base.weight.dtype) * self.scale
        return self.base


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def add_lora(model, rank: int, alpha: float) -> None:
    model.requires_grad_(False)
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name in LORA_TARGETS:
                if hasattr(parent, name):
                    setattr(parent, name, LoRALinear(getattr(parent, name), rank, alpha))
        for norm in (layer.input_layernorm, layer.post_attention_layernorm):
            norm.weight.requires_grad_(True)


def merge_lora(model) -> dict[str, torch.Tensor]:
    """Merge adapters into the weights; return the delta to commit (adapters + norm gains)."""
    delta = {}
    for index, layer in enumerate(model.model.layers):
        for parent_name in ("self_attn", "mlp"):
            parent = getattr(layer, parent_name)
            for name in LORA_TARGETS:
                module = getattr(parent, name, None)
                if isinstance(module, LoRALinear):
                    key = f"layers.{index}.{parent_name}.{name}"
                    delta[f"{key}.lora_A"] = module.lora_A.detach().clone()
                    delta[f"{key}.lora_B"] = (module.lora_B.detach() * module.scale).clone()
                    setattr(parent, name, module.merged())
        for norm_name in ("input_layernorm", "post_attention_layernorm"):
            delta[f"layers.{index}.{norm_name}.weight"] = getattr(layer, norm_name).weight.detach().clone()
    model.requires_grad_(False)
    return delta




@dataclass(frozen=True)
class DecoderRecoveryConfig:
    steps: int = 300
    batch_size: int = 4
    learning_rate: float = 1e-3
    rank: int = 16
    alpha: float = 32.0
    seed: int = 42
    threads: int = 2
    hidden_weight: float = 0.0  # > 0: also match each kept layer's output to the teacher's same layer
    checkpoint_every: int = 25  # steps between checkpoints when recover() is given a checkpoint path

    def __post_init__(self) -> None:
        if min(self.steps, self.batch_size, self.rank, self.threads) < 1 or not self.learning_rate > 0:
            raise ConfigError(f"steps, batch size, rank and threads must be ≥ 1 and the learning rate > 0; got {self.steps}, "
                              f"{self.batch_size}, {self.rank}, {self.threads} and {self.learning_rate}")

    def resumable_key(self) -> dict:
        """What a checkpoint must share with the run that continues it (threads and checkpoint
        spacing may change between runs)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("threads", "checkpoint_every")}


def recovery_texts(tokenizer, max_tokens: int) -> list[torch.Tensor]:
    """Distillation data the project has offline: the SQuAD *training* articles, both as plain
    Wikipedia paragraphs and as chat turns (a training question as the user turn, its paragraph as
    the assistant turn), so the chat-template positions that serving uses are covered too. The
    teacher's logits are the targets, so the text only has to be representative."""
    from optimize.evaluate import squad

    articles = squad.load_articles()
    data = squad.examples(articles, squad.WIDE_VALIDATION.train)  # 9-12 validate reading: they never teach
    paragraphs = list(dict.fromkeys(e.context for e in data))
    questions = {e.context: e.question for e in data}
    texts = [tokenizer(p, return_tensors="pt").input_ids[:, :max_tokens] for p in paragraphs]
    for paragraph in paragraphs:
        chat = tokenizer.apply_chat_template(
            [{"role": "user", "content": questions[paragraph]}, {"role": "assistant", "content": paragraph}],
            tokenize=False)
        texts.append(tokenizer(chat, return_tensors="pt").input_ids[:, :max_tokens])
    return texts


def teacher_chats(teacher, tokenizer, prompts: list[str], new_tokens: int = 48, batch_size: int = 32) -> list[torch.Tensor]:
    """The teacher's greedy answer to each prompt as a user turn, prompt included (1×L each):
    the distribution the generation gate measures on, with none of its held-out prompts."""
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return greedy_answers(teacher, tokenizer, prompts, new_tokens, batch_size, {tokenizer.eos_token_id}, pad_id,
                          bf16_on_cuda=True, progress="teacher answers")


def teacher_chat_set(teacher, tokenizer, baseline_dir: Path) -> list[torch.Tensor]:
    """The teacher's answers to optimize/prompts.py, cached per baseline fingerprint and
    prompt list in artifacts/reference-cache (generating the answers takes minutes on 2 cores):
    a changed prompt set is answered again, never served from the old one's cache."""
    from optimize.evaluate import squad
    from optimize.evaluate.records import content_key, reference_cache
    from optimize.prompts import prompts

    questions = [e.question for e in squad.examples(squad.load_articles(), squad.WIDE_VALIDATION.train) if e.answers]
    asked = prompts(questions)
    cached = reference_cache(baseline_dir, f"teacher-chats-{content_key(asked)}", lambda: {
        "sequences": [chat[0].tolist() for chat in teacher_chats(teacher, tokenizer, asked)]})
    return [torch.tensor(sequence)[None] for sequence in cached["sequences"]]


def padded_batch(batch: list[torch.Tensor], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask) of (1, n) sequences of different lengths, right-padded into one batch so
    that the distillation steps here and in the GPU scripts train on several texts at once."""
    length = max(t.shape[1] for t in batch)
    ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), length), dtype=torch.long)
    for row, t in enumerate(batch):
        ids[row, : t.shape[1]], mask[row, : t.shape[1]] = t[0], 1
    return ids, mask


def hidden_state_loss(student_states, teacher_states, kept_layers: list[int], keep: torch.Tensor) -> torch.Tensor:
    """Mean relative squared error between each student layer's output and the output of the teacher
    layer it was (kept_layers[i]), over real tokens: the layers after a cut learn to start from
    where the dropped ones left off, not only to match the final distribution."""
    errors = []
    for index, source in enumerate(kept_layers):
        ours, theirs = student_states[index + 1][keep].float(), teacher_states[source + 1][keep].float()
        errors.append(((ours - theirs).pow(2).sum(-1) / theirs.pow(2).sum(-1).clamp_min(1e-6)).mean())
    return torch.stack(errors).mean()


def recover(student, teacher, texts: list[torch.Tensor], pad_id: int, config: DecoderRecoveryConfig,
            kept_layers: list[int] | None = None, checkpoint: Path | None = None,
            stop_after: int | None = None) -> list[float]:
    """KL(teacher || student) over every real token (plus hidden_state_loss when
    config.hidden_weight > 0 and kept_layers maps student layers to teacher layers); AdamW on the
    trainable parameters (adapters and norm gains, or every block weight). Returns the losses of
    every step so far: fewer than config.steps when the run was stopped.

    `checkpoint`: every config.checkpoint_every steps the trainable weights, AdamW and schedule
    state, the batch sampler and the losses are written there (atomically), and a call that finds
    a checkpoint continues from it, to the same weights as an uninterrupted run: hours of CPU
    recovery survive a stop. `stop_after`: checkpoint and return after that many steps of this call."""
    import math
    import random
    import time

    from models.machine import has_bf16

    if config.steps == 0:
        return []
    rng = random.Random(config.seed)
    trainable = {name: p for name, p in student.named_parameters() if p.requires_grad}
    params = list(trainable.values())
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 20) * 0.5 * (1 + math.cos(math.pi * step / config.steps)))
    losses: list[float] = []
    start, spent_s = _resume(checkpoint, config, trainable, optimizer, schedule, rng, losses) if checkpoint else (0, 0.0)
    device = next(student.parameters()).device  # a lent GPU distils longer (experiments/gpu/gpu_distill_generation.py)
    bf16 = has_bf16() or device.type == "cuda"
    hidden = config.hidden_weight > 0 and kept_layers is not None
    student.train()
    log_advice(log)
    tokens, started = 0, time.perf_counter()
    for step in range(start, config.steps):
        ids, mask = (t.to(device) for t in padded_batch(rng.sample(texts, config.batch_size), pad_id))
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            with torch.inference_mode():
                taught = teacher(input_ids=ids, attention_mask=mask, use_cache=False, output_hidden_states=hidden)
            learned = student(input_ids=ids, attention_mask=mask, use_cache=False, output_hidden_states=hidden)
        keep = mask.bool()
        loss = distillation_loss(learned.logits.float()[keep][None], taught.logits.float().clone()[keep][None])
        if hidden:
            loss = loss + config.hidden_weight * hidden_state_loss(learned.hidden_states, taught.hidden_states, kept_layers, keep)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
        tokens += int(keep.sum())
        done = step + 1
        if done % 20 == 0 or done == config.steps:
            rate = tokens / (time.perf_counter() - started)
            left_s = (config.steps - done) * (time.perf_counter() - started) / (done - start)
            log.info("recovery step %d/%d  KL %.4f  %.0f training tokens/s  ~%.0f min left", done, config.steps,
                     sum(losses[-20:]) / len(losses[-20:]), rate, left_s / 60)
        stopping = stop_after is not None and done - start >= stop_after and done < config.steps
        if checkpoint and (done % config.checkpoint_every == 0 or stopping):
            _save_checkpoint(checkpoint, config, done, trainable, optimizer, schedule, rng, losses,
                             spent_s + time.perf_counter() - started)
        if stopping:
            log.info("recovery stopped after step %d/%d; checkpoint %s (the same call continues)", done, config.steps, checkpoint)
            break
    student.eval()
    return losses


def _save_checkpoint(path: Path, config: DecoderRecoveryConfig, step: int, trainable: dict, optimizer, schedule, rng,
                     losses: list[float], seconds: float) -> None:
    state = {"step": step, "config": config.resumable_key(), "params": {n: p.detach().clone() for n, p in trainable.items()},
             "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(), "rng": rng.getstate(),
             "losses": losses, "seconds": seconds}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(state, partial)
    partial.replace(path)


def _resume(path: Path, config: DecoderRecoveryConfig, trainable: dict, optimizer, schedule, rng,
            losses: list[float]) -> tuple[int, float]:
    """Load a checkpoint into the run's state; the step to continue from (0: none there) and the
    training seconds that got there."""
    if not path.exists():
        return 0, 0.0
    state = torch.load(path, weights_only=False)
    if state["config"] != config.resumable_key() or set(state["params"]) != set(trainable):
        raise ConfigError(f"{path} was written by another recovery (config {state['config']}); "
                          "delete it to start over, or run with the same options to continue it.")
    with torch.no_grad():
        for name, value in state["params"].items():
            trainable[name].copy_(value)
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    rng.setstate(state["rng"])
    losses.extend(state["losses"])
    log.info("recovery resumed at step %d/%d from %s", state["step"], config.steps, path)
    return state["step"], float(state.get("seconds", 0.0))


def checkpoint_seconds(path: Path) -> float:
    """Training seconds behind a recovery checkpoint: the earlier runs of a resumed job."""
    # mmap: only the small entries are read, not the adapters and AdamW state the run will load anyway
    return float(torch.load(path, weights_only=False, mmap=True).get("seconds", 0.0)) if path.exists() else 0.0


def in_memory_runner(model, tokenizer, path: Path) -> Runner:
    """A torch `Runner` around a model still in memory (a teacher, a student mid-recovery), so the
    evaluation code, which takes Runners, measures it without saving and reloading it."""
    from models.runners import Runner

    return Runner(task="generation", variant="pruned", runtime="torch", path=Path(path), tokenizer=tokenizer, model=model)


def recovery_job_files(output: Path) -> tuple[Path, Path]:
    """Where `run` keeps a recovery's checkpoint and log: under the artifacts root, never in the
    committed output folder."""
    from models.catalog import artifacts_root

    folder = artifacts_root() / "recovery-jobs" / Path(output).name
    return folder / "checkpoint.pt", folder / "recovery.log"


def run(prune_config: DecoderPruneConfig, recovery_config: DecoderRecoveryConfig,
        output: Path = REPO_ROOT / "weights/generation-smollm2-pruned", measure_before: bool = True,
        stop_after: int | None = None) -> dict:
    """Rank, prune, recover, measure; write the plan and the delta (not the weights) to `output`.
    A resumable job: recovery checkpoints and logs (`recovery_job_files`); a run that finds a
    checkpoint of the same recovery continues it; `stop_after` ends this run after that many
    steps (nothing is written to `output` until recovery is complete)."""
    checkpoint, log_file = recovery_job_files(output)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        return _run(prune_config, recovery_config, output, measure_before, stop_after, checkpoint)
    finally:
        log.removeHandler(handler)
        handler.close()


def _run(prune_config: DecoderPruneConfig, recovery_config: DecoderRecoveryConfig, output: Path, measure_before: bool,
         stop_after: int | None, checkpoint: Path) -> dict:
    import json
    import random
    import time

    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from models.catalog import default_preset
    from models.manifest import sha256
    from models.sources import resolve
    from optimize.evaluate.accuracy import generation_accuracy

    torch.set_num_threads(recovery_config.threads)
    torch.manual_seed(recovery_config.seed)
    preset = default_preset("generation")
    baseline_dir = resolve(preset, preset.variant("baseline"))
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    load = lambda: AutoModelForCausalLM.from_pretrained(baseline_dir, dtype=torch.float32).eval()  # noqa: E731
    prune_config.check_fits(AutoConfig.from_pretrained(baseline_dir))  # before minutes of loading and teacher answers
    teacher, student = load(), load()
    chats = teacher_chat_set(teacher, tokenizer, baseline_dir)
    texts = recovery_texts(tokenizer, prune_config.max_tokens) + chats
    calibration = random.Random(recovery_config.seed).sample(chats, prune_config.calibration_texts)
    influence, neurons = importance(student, calibration)
    dropped, kept_neurons = plan(influence, neurons, prune_config)
    prune_with_plan(student, dropped, kept_neurons)
    reference = in_memory_runner(teacher, tokenizer, baseline_dir)
    before_file = checkpoint.with_name("before_recovery.json")  # measured once per job, not once per resumed run
    if before_file.exists() and checkpoint.exists():
        before = json.loads(before_file.read_text())
    else:
        before = generation_accuracy(in_memory_runner(student, tokenizer, output), baseline_dir, lambda: reference) if measure_before else {
            "note": "not measured here; see reports/pruning-sweep-generation.md"}
        before_file.write_text(json.dumps(before))
    log.info("dropped layers %s, FFN widths %s; before recovery %s", dropped, ffn_widths(kept_neurons), before)
    started, earlier_s = time.perf_counter(), checkpoint_seconds(checkpoint)
    add_lora(student, recovery_config.rank, recovery_config.alpha)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    losses = recover(student, teacher, texts, pad_id, recovery_config, checkpoint=checkpoint, stop_after=stop_after)
    if len(losses) < recovery_config.steps:
        return {"stopped_at_step": len(losses), "steps": recovery_config.steps, "checkpoint": str(checkpoint)}
    delta = merge_lora(student)
    after = generation_accuracy(in_memory_runner(student, tokenizer, output), baseline_dir, lambda: reference)
    log.info("after recovery %s", after)
    result = {
        "baseline": str(preset.variant("baseline").source.location),
        "baseline_sha256": sha256(baseline_dir / "model.safetensors"),
        "layers_kept": len(student.model.layers),
        "layer_influence": [round(float(v), 5) for v in influence],
        "prune": prune_config.__dict__, "recovery": recovery_config.__dict__,
        "recovery_data": ("SQuAD 2.0 training articles (0-8; 9-12 validate): paragraphs as plain text and as chat turns, and the "
                          "baseline's greedy answers to 640 training prompts (optimize/prompts.py)"),
        "calibration_data": "the baseline's greedy answers to training prompts",
        "recovery_seconds": round(earlier_s + time.perf_counter() - started),  # every run of a resumed job
        "kl_first_last": [round(sum(losses[:20]) / 20, 4), round(sum(losses[-20:]) / 20, 4)] if losses else None,
        "before_recovery": before, "after_recovery": after,
    }
    save_recovery(output, dropped, kept_neurons, delta, result)
    checkpoint.unlink(missing_ok=True)  # the job is done: its result is the committed delta
    return result
