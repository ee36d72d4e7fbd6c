"""Attention heads of a decoder, pruned so that grouped-query attention stays consistent (issue 30).

A query head reads the key/value head of its group (query head i reads KV head i // group size). So:
- with groups (GQA, SmolLM2: 9 query heads over 3 KV heads), every group keeps the same number of
  its own query heads and every KV head stays;
- without (one KV head per query head), a head goes with its key and value.
The same count is kept in every layer (a transformers config has one head count), so the pruned
model saves and loads as an ordinary checkpoint; `head_dim` is written to the config because the
hidden size over the new head count is no longer the head width.

A head's importance is the accumulated |d loss / d mask| of a mask scaling its slice where the
output projection reads it (Michel et al., 2019), on next-token loss over calibration text.
"""
from __future__ import annotations

import torch

from optimize.prune.decoder_layout import decoder_layers, layout
from optimize.prune.slicing import select_columns, select_rows
from optimize.prune.encoder_layout import module, set_module


def head_shape(config) -> tuple[int, int, int]:
    """(query heads, KV heads, head width)."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return heads, kv_heads, getattr(config, "head_dim", None) or config.hidden_size // heads


def head_importance(model, texts: list[torch.Tensor]) -> torch.Tensor:
    """[layers, query heads], each layer normalised to unit length."""
    spec = layout(model)
    heads, _, width = head_shape(model.config)
    layers = decoder_layers(model)
    mask = torch.ones(len(layers), heads, requires_grad=True)

    def gate(index):
        def scale(_, inputs):
            return ((inputs[0].unflatten(-1, (heads, width)) * mask[index][:, None]).flatten(-2), *inputs[1:])
        return scale

    handles = [module(layer, spec.attention_out).register_forward_pre_hook(gate(i)) for i, layer in enumerate(layers)]
    try:
        for ids in texts:
            model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    model.zero_grad()
    scores = mask.grad.abs()
    return scores / scores.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def kept_heads(importance: torch.Tensor, kv_heads: int, share: float) -> tuple[list[list[int]], list[list[int]]]:
    """Per layer: (kept query heads, kept KV heads), sorted. `share` of each group's query heads
    (at least one) where heads are grouped; `share` of the heads with their keys and values otherwise."""
    heads = importance.shape[1]
    group = heads // kv_heads
    queries, kvs = [], []
    for scores in importance:
        if group > 1:
            per_group = min(group, max(1, round(share * group)))
            kept = [g * group + int(h) for g in range(kv_heads)
                    for h in scores[g * group:(g + 1) * group].argsort(descending=True)[:per_group]]
            queries.append(sorted(kept))
            kvs.append(list(range(kv_heads)))
        else:
            kept = sorted(scores.argsort(descending=True)[: min(heads, max(1, round(share * heads)))].tolist())
            queries.append(kept)
            kvs.append(kept)
    return queries, kvs


def prune_heads(model, queries: list[list[int]], kvs: list[list[int]]) -> None:
    """Keep query heads `queries[layer]` and KV heads `kvs[layer]` (same counts in every layer), in
    place; the config follows. Rebuild the model from its config afterwards (attention modules
    cache head counts)."""
    spec = layout(model)
    if spec.heads_fixed:
        raise ValueError(spec.heads_fixed)
    heads, kv_heads, width = head_shape(model.config)

    def rows(kept: list[int], offset: int = 0) -> torch.Tensor:
        return torch.cat([torch.arange(offset + h * width, offset + (h + 1) * width) for h in kept])

    for layer, query, kv in zip(decoder_layers(model), queries, kvs):
        if len(spec.qkv) == 1:  # Phi-3: queries, then keys, then values in one matrix
            fused = torch.cat([rows(query), rows(kv, heads * width), rows(kv, (heads + kv_heads) * width)])
            set_module(layer, spec.qkv[0], select_rows(module(layer, spec.qkv[0]), fused))
        else:
            for path, kept in zip(spec.qkv, (query, kv, kv)):
                set_module(layer, path, select_rows(module(layer, path), rows(kept)))
        set_module(layer, spec.attention_out, select_columns(module(layer, spec.attention_out), rows(query)))
    model.config.num_attention_heads, model.config.num_key_value_heads = len(queries[0]), len(kvs[0])
    model.config.head_dim = width
