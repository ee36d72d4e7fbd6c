"""Where each encoder architecture keeps what structured pruning cuts: its layers, the attention
projections that carry the heads, the two FFN matrices, and the config keys that must follow the
cut so the pruned model saves and loads as an ordinary transformers checkpoint.

Why a table and not one model: pruning is the same arithmetic on every BERT-like encoder (slice
rows of Q/K/V and columns of the output projection per head; rows of the FFN input and columns of
the FFN output per neuron); only the names differ (issue 30).
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn


class UnsupportedArchitecture(ValueError):
    """The model's architecture has no pruning layout: the message names what is missing."""


@dataclass(frozen=True)
class EncoderLayout:
    layers: str  # dotted path from the QA model to the ModuleList of encoder layers
    query: str  # per layer, dotted paths to the head-structured projections ...
    key: str
    value: str
    attention_out: str  # ... the projection that reads the heads back
    ffn_in: str
    ffn_out: str
    ffn_size_key: str = "intermediate_size"
    layers_key: str = "num_hidden_layers"
    heads_key: str = "num_attention_heads"
    heads_fixed: str = ""  # why this architecture keeps every head (its checkpoints cannot load fewer)
    shared_layers: bool = False  # ALBERT: one layer run `num_hidden_layers` times


def _bert_like(base: str) -> EncoderLayout:
    return EncoderLayout(f"{base}.encoder.layer", "attention.self.query", "attention.self.key", "attention.self.value",
                         "attention.output.dense", "intermediate.dense", "output.dense")


LAYOUTS: dict[str, EncoderLayout] = {
    "bert": _bert_like("bert"),
    "roberta": _bert_like("roberta"),
    "xlm-roberta": _bert_like("roberta"),
    "electra": _bert_like("electra"),
    "distilbert": EncoderLayout("distilbert.transformer.layer", "attention.q_lin", "attention.k_lin", "attention.v_lin",
                                "attention.out_lin", "ffn.lin1", "ffn.lin2", ffn_size_key="hidden_dim",
                                layers_key="n_layers", heads_key="n_heads"),
    "albert": EncoderLayout("albert.encoder.albert_layer_groups.0.albert_layers", "attention.query", "attention.key",
                            "attention.value", "attention.dense", "ffn", "ffn_output", shared_layers=True),
    "deberta-v2": EncoderLayout("deberta.encoder.layer", "attention.self.query_proj", "attention.self.key_proj",
                                "attention.self.value_proj", "attention.output.dense", "intermediate.dense",
                                "output.dense",
                                heads_fixed="DeBERTa-v2 has no prune_heads and sizes its attention output "
                                            "projection hidden x hidden, so a checkpoint with fewer heads does not load"),
}


def known_layout(layouts: dict, model, kind: str, table: str):
    """The layout for `model`'s family in `layouts`, or UnsupportedArchitecture naming the families it knows."""
    model_type = model.config.model_type
    if model_type not in layouts:
        raise UnsupportedArchitecture(
            f"structured pruning does not know the '{model_type}' {kind} (it knows {', '.join(sorted(layouts))}); "
            f"the optimized variant still builds, the pruned ones need a layout in {table}")
    return layouts[model_type]


def layout(model) -> EncoderLayout:
    found = known_layout(LAYOUTS, model, "architecture", "optimize/prune/encoder_layout.py")
    if found.shared_layers and getattr(model.config, "num_hidden_groups", 1) != 1:
        raise UnsupportedArchitecture("structured pruning of ALBERT needs one shared layer group (num_hidden_groups 1)")
    return found


def module(root: nn.Module, path: str) -> nn.Module | None:
    for name in path.split("."):
        root = getattr(root, name, None) if not name.isdigit() else root[int(name)]
        if root is None:
            return None
    return root


def set_module(root: nn.Module, path: str, value: nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(module(root, parent) if parent else root, name, value)


def encoder_layers(model) -> nn.ModuleList:
    return module(model, layout(model).layers)


def head_count(model) -> int:
    return getattr(model.config, layout(model).heads_key)
