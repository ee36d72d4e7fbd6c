"""Structured pruning's one operation on a projection: a smaller copy keeping some output features
(rows) or input features (columns). The encoder's FFN neurons and the decoder's heads and FFN
neurons are all cut through it."""
from __future__ import annotations

import torch
from torch import nn


def select_rows(layer: nn.Module, rows: torch.Tensor) -> nn.Module:
    return select_linear(layer, rows, output=True, conv1d=False)


def select_columns(layer: nn.Module, columns: torch.Tensor) -> nn.Module:
    return select_linear(layer, columns, output=False, conv1d=False)


def select_linear(layer: nn.Module, index: torch.Tensor, output: bool, conv1d: bool) -> nn.Module:
    """A copy of a Linear (or GPT-2 Conv1D) keeping output features `index` (output=True) or input ones."""
    weight, bias = layer.weight.detach(), None if layer.bias is None else layer.bias.detach()
    if conv1d:  # weight [in, out]
        from transformers.pytorch_utils import Conv1D

        weight = weight[:, index] if output else weight[index]
        out = Conv1D(weight.shape[1], weight.shape[0])
        out.weight.data = weight.clone()
        out.bias.data = (bias[index] if output else bias).clone()
        return out
    weight = weight[index] if output else weight[:, index]
    out = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    out.weight.data = weight.clone()
    if bias is not None:
        out.bias.data = (bias[index] if output else bias).clone()
    return out
