"""SmoothQuant (Xiao et al., 2023) for the MLPs of a LLaMA-style decoder, before INT8.

MatMulNBits at accuracy level 4 quantizes activations to int8 per block of 16 channels; a few
channels of the RMSNorm output (and of silu(gate)·up) are far larger than the rest, so their
blocks lose precision. Dividing those channels by s and multiplying the matching weight columns
by s moves the range into the weights, which are quantized per block too. In a pre-norm decoder
both moves are exact in fp32: the post-attention RMSNorm feeds only gate/up (the residual is
taken before it), and up enters silu(gate)·up linearly, so its rows can carry down's 1/s.
"""
from __future__ import annotations

import torch

CALIBRATION_PROMPTS = 32


def smooth_mlps(model, tokenizer, alpha: float = 0.5):
    """Smooth `model`'s MLPs in place with migration strength `alpha` (the paper's 0.5)."""
    from models.generation import preprocess
    from optimize.recovery_prompts import prompts

    inputs = {name: {} for name in ("gate_proj", "down_proj")}

    def record(name: str, layer: int):
        def hook(module, args, output):
            peak = args[0].detach().abs().flatten(0, 1).amax(0)
            seen = inputs[name].get(layer)
            inputs[name][layer] = peak if seen is None else torch.maximum(seen, peak)
        return hook

    handles = [getattr(layer.mlp, name).register_forward_hook(record(name, index))
               for index, layer in enumerate(model.model.layers) for name in inputs]
    try:
        with torch.inference_mode():
            for prompt in prompts([], 2 * CALIBRATION_PROMPTS)[:CALIBRATION_PROMPTS]:  # instructions, no held-out ones
                model(input_ids=preprocess(tokenizer, prompt))
    finally:
        for handle in handles:
            handle.remove()
    with torch.no_grad():
        for index, layer in enumerate(model.model.layers):
            mlp = layer.mlp
            weights = torch.maximum(mlp.gate_proj.weight.abs().amax(0), mlp.up_proj.weight.abs().amax(0))
            scale = _scale(inputs["gate_proj"][index], weights, alpha)
            layer.post_attention_layernorm.weight.div_(scale)
            mlp.gate_proj.weight.mul_(scale)
            mlp.up_proj.weight.mul_(scale)
            scale = _scale(inputs["down_proj"][index], mlp.down_proj.weight.abs().amax(0), alpha)
            mlp.up_proj.weight.div_(scale[:, None])
            mlp.down_proj.weight.mul_(scale)
    return model


def _scale(activation_peak: torch.Tensor, weight_peak: torch.Tensor, alpha: float) -> torch.Tensor:
    """s_j = max|X_j|^α / max|W_j|^(1−α), bounded so that no channel is scaled to nothing."""
    return (activation_peak.clamp(min=1e-5) ** alpha / weight_peak.clamp(min=1e-5) ** (1 - alpha)).clamp(1e-2, 1e2)

