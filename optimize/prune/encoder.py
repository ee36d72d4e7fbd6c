"""Structured pruning of a QA encoder (BERT, RoBERTa, DistilBERT, ELECTRA, ALBERT, DeBERTa-v2:
optimize/prune/encoder_layout.py): attention heads and FFN neurons, ranked on calibration windows
from the training articles, removed for real (smaller dense matrices, no masks in the graph). The
recovery by distillation from the unpruned model lives in optimize/train/recover_qa.py.

Importance (why these): a head's importance is the accumulated |d loss / d head_mask| (Michel et
al., 2019), normalised per layer; an FFN neuron's is its mean |activation| times the L2 norm of
its output weights (what it actually writes into the residual stream). The same number of heads
and neurons is kept in every layer so the ONNX graph keeps one attention shape that ONNX Runtime
can fuse.
"""
from __future__ import annotations

import inspect
import logging
import random
from dataclasses import dataclass

import torch
from torch import nn

from models.errors import ConfigError
from optimize.evaluate.squad import collate
from optimize.prune.encoder_layout import encoder_layers, head_count, layout, module, set_module
from optimize.prune.slicing import select_columns, select_rows

log = logging.getLogger("optimize.prune.encoder")


@dataclass(frozen=True)
class PruneConfig:
    heads_kept: int = 8  # per layer, of 12
    ffn_kept: int = 1024  # neurons per layer, of 1536
    layers_dropped: int = 0  # whole encoder layers removed: those whose absence costs the least loss
    calibration_windows: int = 256
    batch_size: int = 16
    seed: int = 42

    def __post_init__(self) -> None:
        if self.heads_kept < 1 or self.ffn_kept < 1 or self.layers_dropped < 0:
            raise ConfigError(f"heads and FFN neurons kept must be ≥ 1 and layers dropped ≥ 0; got {self.heads_kept}, "
                              f"{self.ffn_kept} and {self.layers_dropped}")

    def check_fits(self, model_config) -> None:
        """Said before any work when the cut asks more than the model has (a transformers config)."""
        width = getattr(model_config, "intermediate_size", None) or model_config.hidden_dim  # DistilBERT: hidden_dim
        heads, layers = model_config.num_attention_heads, model_config.num_hidden_layers
        if self.heads_kept > heads or self.ffn_kept > width or self.layers_dropped >= layers:
            raise ConfigError(f"the model has {heads} heads and {width} FFN neurons per layer and {layers} layers; "
                              f"asked to keep {self.heads_kept} heads and {self.ffn_kept} neurons and drop {self.layers_dropped} layers")


def importance(model, features: list[dict], pad_id: int, config: PruneConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(head importance [layers, heads], FFN neuron importance [layers, intermediate]). A head's
    gradient comes from a mask that scales its slice of the context where the attention output
    projection reads it: the same gradient as transformers' `head_mask` on the attention
    probabilities, but on every architecture (DeBERTa-v2 has no `head_mask`)."""
    spec = layout(model)
    layers = encoder_layers(model)
    heads = head_count(model)
    head_mask = torch.ones(len(layers), heads, requires_grad=True)
    activation = [torch.zeros(module(layer, spec.ffn_out).in_features) for layer in layers]
    mask_holder: dict[str, torch.Tensor] = {}

    def gate_heads(index):
        def scale(_, inputs):
            context = inputs[0].unflatten(-1, (heads, -1)) * head_mask[index][:, None]
            return (context.flatten(-2), *inputs[1:])
        return scale

    def record_ffn(index):
        def record(_, inputs):
            tokens = mask_holder["mask"].unsqueeze(-1).float()
            activation[index] += (inputs[0].detach().abs() * tokens).sum(dim=(0, 1))
        return record

    handles = [h for i, layer in enumerate(layers) for h in (
        module(layer, spec.attention_out).register_forward_pre_hook(gate_heads(i)),
        module(layer, spec.ffn_out).register_forward_pre_hook(record_ffn(i)))]
    sample = random.Random(config.seed).sample(features, min(config.calibration_windows, len(features)))
    model.eval()
    try:
        for start in range(0, len(sample), config.batch_size):
            batch = model_inputs(model, collate(sample[start:start + config.batch_size], pad_id))
            mask_holder["mask"] = batch["attention_mask"]
            model(**batch).loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    head_importance = head_mask.grad.abs()
    head_importance = head_importance / head_importance.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    ffn_importance = torch.stack([
        activation[i] * module(layer, spec.ffn_out).weight.detach().norm(dim=0) for i, layer in enumerate(layers)
    ])
    model.zero_grad()
    return head_importance, ffn_importance


def model_inputs(model, batch: dict) -> dict:
    """The batch without inputs the architecture does not take (DistilBERT has no token types)."""
    accepted = inspect.signature(model.forward).parameters
    return {k: v for k, v in batch.items() if k in accepted}


def prune(model, head_importance: torch.Tensor, ffn_importance: torch.Tensor, config: PruneConfig):
    """Remove the least important heads and FFN neurons of every layer, in place."""
    spec = layout(model)
    heads = head_count(model)
    kept_heads = [scores.argsort(descending=True)[: config.heads_kept].sort().values for scores in head_importance]
    if config.heads_kept < heads and spec.heads_fixed:
        log.warning("keeping all %d heads: %s", heads, spec.heads_fixed)
    elif config.heads_kept < heads:
        model.prune_heads({i: [h for h in range(heads) if h not in keep.tolist()] for i, keep in enumerate(kept_heads)})
    for layer_index, layer in enumerate(encoder_layers(model)):
        keep = ffn_importance[layer_index].argsort(descending=True)[: config.ffn_kept].sort().values
        set_module(layer, spec.ffn_in, select_rows(module(layer, spec.ffn_in), keep))
        set_module(layer, spec.ffn_out, select_columns(module(layer, spec.ffn_out), keep))
    setattr(model.config, spec.ffn_size_key, config.ffn_kept)
    return model


def calibration_loss(model, sample: list[dict], pad_id: int, batch_size: int) -> float:
    with torch.inference_mode():
        return sum(float(model(**model_inputs(model, collate(sample[i:i + batch_size], pad_id))).loss)
                   for i in range(0, len(sample), batch_size)) / max(1, len(sample) // batch_size)


def drop_layers(model, features: list[dict], pad_id: int, config: PruneConfig):
    """Remove the `layers_dropped` encoder layers whose absence raises the calibration loss least
    (each scored alone: one forward pass over the calibration windows per layer). ALBERT runs one
    shared layer `num_hidden_layers` times: there it runs it fewer times."""
    if not config.layers_dropped:
        return model
    spec = layout(model)
    if spec.shared_layers:
        setattr(model.config, spec.layers_key, getattr(model.config, spec.layers_key) - config.layers_dropped)
        return model
    layers = encoder_layers(model)
    sample = random.Random(config.seed).sample(features, min(config.calibration_windows, len(features)))
    cost = []
    for index in range(len(layers)):
        set_module(model, spec.layers, nn.ModuleList(layer for j, layer in enumerate(layers) if j != index))
        cost.append(calibration_loss(model, sample, pad_id, config.batch_size))
    dropped = sorted(sorted(range(len(layers)), key=cost.__getitem__)[: config.layers_dropped])
    log.info("calibration loss without each layer %s; dropping %s", [round(c, 3) for c in cost], dropped)
    kept = [j for j in range(len(layers)) if j not in dropped]
    set_module(model, spec.layers, nn.ModuleList(layers[j] for j in kept))
    setattr(model.config, spec.layers_key, len(kept))
    # the pruned-head record is keyed by layer index and replayed on load: renumber it
    pruned_heads = {int(k): v for k, v in (model.config.pruned_heads or {}).items()}
    model.config.pruned_heads = {new: pruned_heads[old] for new, old in enumerate(kept) if pruned_heads.get(old)}
    return model


def load_baseline(path):
    """Eager attention: head importance needs `head_mask`, which the fused kernels do not take."""
    from transformers import AutoModelForQuestionAnswering
    return AutoModelForQuestionAnswering.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")


ATTENTION_DROPOUT_KEYS = ("attention_probs_dropout_prob", "attention_dropout")  # BERT family, DistilBERT


def with_fused_attention(model, attention_dropout: float | None = None):
    """The same weights behind PyTorch's fused attention (SDPA) where the architecture has it, for
    distillation once pruning is done: eager attention with dropout spent most of a CPU training step
    drawing and applying the dropout mask over every head's full attention matrix. `attention_dropout`
    replaces the config's (at 0 SDPA takes its flash kernel, about twice as fast again)."""
    import copy
    config = copy.deepcopy(model.config)
    if attention_dropout is not None:
        for key in ATTENTION_DROPOUT_KEYS:
            if hasattr(config, key):
                setattr(config, key, attention_dropout)
    fused = type(model)._from_config(config, attn_implementation="sdpa" if model._supports_sdpa else "eager",
                                     dtype=torch.float32)
    fused.load_state_dict(model.state_dict())
    return fused.train(model.training)


def pruned_copy(baseline_dir, features, pad_id, config: PruneConfig):
    model = load_baseline(baseline_dir)
    head_importance, ffn_importance = importance(model, features, pad_id, config)
    return drop_layers(prune(model, head_importance, ffn_importance, config), features, pad_id, config)
