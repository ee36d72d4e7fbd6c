"""Decoders whose layers have different FFN widths, through builders that assume one width.

ONNX Runtime GenAI's model builder reads `intermediate_size` and loads the model with
transformers, so a globally pruned decoder (optimize/prune/decoder.global_ffn_plan) is
built zero-padded to its widest layer, then each layer's gate/up/down MatMuls are cut back to
its real width. The kept neurons come first in every layer, so the cut drops whole rows (gate, up) and
whole blocks (down) past the block holding the last kept neuron, whose padding columns are zero weights
that K = width leaves unread: the graph computes exactly what the narrow PyTorch model does.
"""
from __future__ import annotations

from pathlib import Path

import torch


def pad_to_uniform(model):
    """Zero-pad every MLP of `model` (in place) to the widest one; padding neurons output 0."""
    width = model.config.intermediate_size
    for layer in model.model.layers:
        mlp = layer.mlp
        for name in ("gate_proj", "up_proj"):
            linear = getattr(mlp, name)
            padded = torch.nn.Linear(linear.in_features, width, bias=False)
            padded.weight.data.zero_()[: linear.out_features] = linear.weight.data
            setattr(mlp, name, padded)
        padded = torch.nn.Linear(width, mlp.down_proj.out_features, bias=False)
        padded.weight.data.zero_()[:, : mlp.down_proj.in_features] = mlp.down_proj.weight.data
        mlp.down_proj = padded
    del model.config.intermediate_sizes
    return model


def narrow(model_path: Path, widths: list[int]) -> None:
    """Cut each layer's gate/up outputs and down inputs of the built graph to `widths[layer]`."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(model_path))  # with its external data: the weights are rewritten
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}

    def replace(name: str, array) -> None:
        initializers[name].CopyFrom(numpy_helper.from_array(array.copy(), name))

    for node in model.graph.node:
        parts = node.name.split("/")  # /model/layers.{i}/mlp/{proj}/MatMul[_Q8]
        if (node.op_type not in ("MatMulNBits", "MatMul") or len(parts) < 5 or parts[3] != "mlp"
                or not parts[2].startswith("layers.") or parts[4] not in ("gate_proj", "up_proj", "down_proj")):
            continue
        width, projection = widths[int(parts[2].split(".")[1])], parts[4]
        weight = numpy_helper.to_array(initializers[node.input[1]])
        attributes = {attribute.name: attribute for attribute in node.attribute}
        if node.op_type == "MatMulNBits":  # weight [N, K / block, block], scales [N, K / block]
            scales = numpy_helper.to_array(initializers[node.input[2]])
            if projection == "down_proj":
                blocks = -(-width // attributes["block_size"].i)  # a last block past `width` holds the padding: K ignores it
                replace(node.input[1], weight[:, :blocks]), replace(node.input[2], scales[:, :blocks])
                attributes["K"].i = width
            else:
                replace(node.input[1], weight[:width]), replace(node.input[2], scales[:width])
                attributes["N"].i = width
        elif node.op_type == "MatMul":  # weight [K, N]
            replace(node.input[1], weight[:width] if projection == "down_proj" else weight[:, :width])
    stale = [info for info in model.graph.value_info if "/mlp/" in info.name]  # shapes recorded at full width
    for info in stale:
        model.graph.value_info.remove(info)
    data = model_path.with_name(model_path.name + ".data")
    data.unlink(missing_ok=True)
    onnx.save(model, str(model_path), save_as_external_data=True, all_tensors_to_one_file=True, location=data.name)
