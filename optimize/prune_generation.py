"""Structured pruning of a LLaMA-style decoder: whole layers and FFN neurons, ranked on
calibration text, removed for real, then recovered by distillation from the unpruned model.

Layer importance is ShortGPT's block influence, 1 − cos(hidden in, hidden out) averaged over
calibration tokens: a layer that barely turns the residual stream can go. FFN neuron importance
is mean |silu(gate) · up| times the L2 norm of its down-projection column. Recovery data is text
the project has offline: Wikipedia paragraphs of the SQuAD *training* articles (the held-out
perplexity uses the test articles).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

log = logging.getLogger("optimize.prune_generation")


@dataclass(frozen=True)
class DecoderPruneConfig:
    layers_dropped: int = 6
    ffn_kept: int = 1152  # of 1536 per layer
    calibration_texts: int = 32
    max_tokens: int = 256


def importance(model, texts: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(layer influence [layers], FFN neuron importance [layers, intermediate])."""
    layers = model.model.layers
    influence = torch.zeros(len(layers))
    activation = torch.zeros(len(layers), layers[0].mlp.down_proj.in_features)
    tokens = 0

    def layer_hook(index):
        def record(module, args, kwargs, output):
            hidden_in = args[0] if args else kwargs["hidden_states"]
            hidden_out = output[0] if isinstance(output, tuple) else output
            cos = nn.functional.cosine_similarity(hidden_in.float(), hidden_out.float(), dim=-1)
            influence[index] += (1 - cos).sum()
        return record

    def mlp_hook(index):
        def record(module, args, output):
            activation[index] += args[0].detach().abs().sum(dim=(0, 1))
        return record

    handles = [layer.register_forward_hook(layer_hook(i), with_kwargs=True) for i, layer in enumerate(layers)]
    handles += [layer.mlp.down_proj.register_forward_hook(mlp_hook(i)) for i, layer in enumerate(layers)]
    try:
        with torch.inference_mode():
            for ids in texts:
                model(input_ids=ids, use_cache=False)
                tokens += ids.numel()
    finally:
        for handle in handles:
            handle.remove()
    norms = torch.stack([layer.mlp.down_proj.weight.detach().norm(dim=0) for layer in layers])
    return influence / tokens, activation / tokens * norms


def _rows(linear: nn.Linear, index: torch.Tensor) -> nn.Linear:
    out = nn.Linear(linear.in_features, len(index), bias=linear.bias is not None)
    out.weight.data = linear.weight.detach()[index].clone()
    if linear.bias is not None:
        out.bias.data = linear.bias.detach()[index].clone()
    return out


def _columns(linear: nn.Linear, index: torch.Tensor) -> nn.Linear:
    out = nn.Linear(len(index), linear.out_features, bias=linear.bias is not None)
    out.weight.data = linear.weight.detach()[:, index].clone()
    if linear.bias is not None:
        out.bias.data = linear.bias.detach().clone()
    return out


def prune(model, influence: torch.Tensor, neurons: torch.Tensor, config: DecoderPruneConfig):
    """Drop the least influential layers (never the first or last) and the weakest FFN neurons."""
    candidates = [i for i in influence.argsort().tolist() if 0 < i < len(influence) - 1]
    dropped = set(candidates[: config.layers_dropped])
    kept = [i for i in range(len(influence)) if i not in dropped]
    for index in kept:
        mlp = model.model.layers[index].mlp
        keep = neurons[index].argsort(descending=True)[: config.ffn_kept].sort().values
        mlp.gate_proj, mlp.up_proj = _rows(mlp.gate_proj, keep), _rows(mlp.up_proj, keep)
        mlp.down_proj = _columns(mlp.down_proj, keep)
    model.model.layers = nn.ModuleList(model.model.layers[i] for i in kept)
    for new_index, layer in enumerate(model.model.layers):
        layer.self_attn.layer_idx = new_index  # the KV cache is indexed by layer
    model.config.num_hidden_layers = len(kept)
    model.config.intermediate_size = config.ffn_kept
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = [model.config.layer_types[i] for i in kept]
    log.info("dropped layers %s; kept %d FFN neurons per layer", sorted(dropped), config.ffn_kept)
    return model, sorted(dropped)


def distillation_loss(student_logits, teacher_logits, temperature: float = 1.0) -> torch.Tensor:
    """KL(teacher || student) over the vocabulary at every position."""
    return nn.functional.kl_div(
        torch.log_softmax(student_logits / temperature, -1).flatten(0, 1),
        torch.softmax(teacher_logits / temperature, -1).flatten(0, 1), reduction="batchmean",
    ) * temperature**2
