"""Where each decoder architecture keeps what structured pruning cuts: its layers, the FFN matrices
whose neurons go (rows of the input projections, columns of the output one) and the config keys
that follow the cut, so a pruned model saves and loads as an ordinary transformers checkpoint.

Why a table: layer dropping and FFN narrowing are the same arithmetic on Llama, Mistral, Qwen2,
Gemma, Phi-3 and GPT-2; only the names and two storage forms differ (Phi-3 fuses gate and up into
one matrix; GPT-2's Conv1D stores weights transposed) (issue 30).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from optimize.prune.encoder_layout import known_layout, module, set_module
from optimize.prune.slicing import select_linear


@dataclass(frozen=True)
class DecoderLayout:
    layers: str  # dotted path from the causal LM to its ModuleList of layers
    attention: str  # per layer: the attention module, whose `layer_idx` addresses the KV cache
    ffn_in: tuple[str, ...]  # per layer: projections whose output neurons are the FFN's ...
    ffn_out: str  # ... and the projection that reads them back
    fused_gate_up: bool = False  # Phi-3: one matrix holds gate rows then up rows
    conv1d: bool = False  # GPT-2: weights stored [in, out]
    ffn_size_key: str = "intermediate_size"
    layers_key: str = "num_hidden_layers"
    qkv: tuple[str, ...] = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")  # per layer; one path: fused
    attention_out: str = "self_attn.o_proj"  # reads the heads' outputs, head after head
    heads_fixed: str = ""  # why this family keeps every head


_LLAMA_LIKE = DecoderLayout("model.layers", "self_attn", ("mlp.gate_proj", "mlp.up_proj"), "mlp.down_proj")
LAYOUTS: dict[str, DecoderLayout] = {
    "llama": _LLAMA_LIKE, "mistral": _LLAMA_LIKE, "qwen2": _LLAMA_LIKE, "gemma": _LLAMA_LIKE, "gemma2": _LLAMA_LIKE,
    "phi3": DecoderLayout("model.layers", "self_attn", ("mlp.gate_up_proj",), "mlp.down_proj", fused_gate_up=True,
                          qkv=("self_attn.qkv_proj",)),
    "gpt2": DecoderLayout("transformer.h", "attn", ("mlp.c_fc",), "mlp.c_proj", conv1d=True, ffn_size_key="n_inner",
                          layers_key="n_layer", qkv=("attn.c_attn",), attention_out="attn.c_proj",
                          heads_fixed="GPT-2's head width is its hidden size over its head count, so fewer heads "
                                      "would change every head's width"),
}


def layout(model) -> DecoderLayout:
    return known_layout(LAYOUTS, model, "decoder", "optimize/prune/decoder_layout.py")


def decoder_layers(model) -> nn.ModuleList:
    return module(model, layout(model).layers)


def ffn_width(model) -> int:
    spec = layout(model)
    out = module(decoder_layers(model)[0], spec.ffn_out)
    return out.weight.shape[0] if spec.conv1d else out.in_features


def ffn_out_norms(layer: nn.Module, spec: DecoderLayout) -> torch.Tensor:
    """Per FFN neuron, the L2 norm of what it writes into the residual stream."""
    weight = module(layer, spec.ffn_out).weight.detach()
    return weight.norm(dim=1) if spec.conv1d else weight.norm(dim=0)


def narrow_ffn(layer: nn.Module, spec: DecoderLayout, keep: torch.Tensor) -> None:
    """Keep FFN neurons `keep` (sorted indices) of one layer, in place."""
    for path in spec.ffn_in:
        linear = module(layer, path)
        rows = keep
        if spec.fused_gate_up:
            rows = torch.cat([keep, keep + linear.out_features // 2])
        set_module(layer, path, select_linear(linear, rows, output=True, conv1d=spec.conv1d))
    set_module(layer, spec.ffn_out, select_linear(module(layer, spec.ffn_out), keep, output=False, conv1d=spec.conv1d))
