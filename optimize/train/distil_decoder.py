"""A user's decoder, pruned and recovered by the build (`optimize build --model ... --task generation`):
the least influential layers, the weakest FFN neurons (in groups of 32) and attention heads (grouped-query
attention kept consistent: optimize/prune/decoder_heads.py) go, then every remaining
weight is distilled from the unpruned model for `recovery_steps` steps.

Why not the default's LoRA recovery (optimize/train/recover_decoder.py): that one exists because the
default's recovered weights must be committed under a size cap and assembled by a fresh clone. A
user's pruned model is an artifact of their own build, so full-parameter distillation, the simpler
and stronger recovery, is the right one here.
"""
from __future__ import annotations

import logging
import random
from pathlib import Path

import torch

from optimize.prune.decoder import DecoderPruneConfig, ffn_widths, importance, plan, prune_with_plan
from optimize.prune.decoder_heads import head_importance, head_shape, kept_heads, prune_heads
from optimize.prune.decoder_layout import decoder_layers, ffn_width, layout
from optimize.train.recover_decoder import distillation_loss, recovery_texts

log = logging.getLogger(__name__)
FFN_GROUP = 32  # kept FFN widths are multiples of this: the INT8 kernels' blocks stay whole
MAX_TOKENS = 256
LEARNING_RATE = 5e-5


def prune_and_recover(baseline_dir: Path, output: Path, spec, progress=log.info) -> dict:
    """`spec`: models.catalog.PruneSpec (share of FFN neurons kept, layers dropped, recovery steps, data)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(baseline_dir)
    texts = _texts(tokenizer, spec.data)
    teacher = AutoModelForCausalLM.from_pretrained(baseline_dir, dtype=torch.float32).eval()
    student = AutoModelForCausalLM.from_pretrained(baseline_dir, dtype=torch.float32)
    width = ffn_width(student)
    kept_width = min(width, max(FFN_GROUP, round(spec.ffn_kept * width / FFN_GROUP) * FFN_GROUP))
    config = DecoderPruneConfig(layers_dropped=spec.layers_dropped, ffn_kept=kept_width)
    heads, kv_heads, _ = head_shape(student.config)
    calibration = texts[: config.calibration_texts]
    influence, neurons = importance(student, calibration)
    heads_kept = _prune_heads(student, calibration, kv_heads, spec.heads_kept, progress)
    dropped, kept_neurons = plan(influence, neurons, config)
    prune_with_plan(student, dropped, kept_neurons)
    student = _rebuilt(student)
    progress(f"dropped layers {dropped}, FFN {kept_width}/{width} neurons and {heads_kept}/{heads} heads per layer; "
             f"distilling every weight for {spec.recovery_steps} steps")
    optimizer = torch.optim.AdamW(student.parameters(), lr=LEARNING_RATE)
    order = random.Random(0)
    student.train()
    for step in range(spec.recovery_steps):
        ids = texts[order.randrange(len(texts))]
        with torch.inference_mode():
            target = teacher(input_ids=ids, use_cache=False).logits.clone()
        loss = distillation_loss(student(input_ids=ids, use_cache=False).logits, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if (step + 1) % 25 == 0:
            log.info("recovery step %d/%d: KL %.4f", step + 1, spec.recovery_steps, loss.item())
    student.eval().save_pretrained(output, safe_serialization=True)
    tokenizer.save_pretrained(output)
    return {"dropped_layers": dropped, "layers": len(decoder_layers(student)), "ffn_kept": ffn_widths(kept_neurons)[0],
            "ffn": width, "heads_kept": heads_kept, "heads": heads, "recovery_steps": spec.recovery_steps}


def _prune_heads(model, calibration: list[torch.Tensor], kv_heads: int, share: float, progress) -> int:
    """Query heads kept per layer (all of them where the family's heads cannot go)."""
    heads = model.config.num_attention_heads
    if share >= 1.0:
        return heads
    if layout(model).heads_fixed:
        progress(f"keeping all {heads} heads: {layout(model).heads_fixed}")
        return heads
    queries, kvs = kept_heads(head_importance(model, calibration), kv_heads, share)
    prune_heads(model, queries, kvs)
    return len(queries[0])


def _rebuilt(model):
    """The pruned model constructed from its own config, as it will load: attention modules cache
    their head counts at construction."""
    from transformers import AutoModelForCausalLM

    rebuilt = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
    rebuilt.load_state_dict(model.state_dict())
    return rebuilt


def _texts(tokenizer, data: str | None) -> list[torch.Tensor]:
    """The shared SQuAD training paragraphs (plain and as chat turns), or the paragraphs of `data`."""
    if not data:
        return recovery_texts(tokenizer, MAX_TOKENS)
    from optimize.evaluate import squad

    paragraphs = dict.fromkeys(e.context for e in squad.all_examples(Path(data)))
    return [tokenizer(p, return_tensors="pt").input_ids[:, :MAX_TOKENS] for p in paragraphs]
