"""SmoothQuant (Xiao et al., 2023) for a LLaMA-style decoder, before INT8.

MatMulNBits at accuracy level 4 quantizes activations to int8 per block of 16 channels; a few
channels of the RMSNorm output (and of silu(gate)·up) are far larger than the rest, so their
blocks lose precision. Dividing those channels by s and multiplying the matching weight columns
by s moves the range into the weights, which are quantized per block too. In a pre-norm decoder
every move is exact in fp32: an RMSNorm feeds only the projections after it (the residual is
taken before it), up enters silu(gate)·up linearly, so its rows can carry down's 1/s, and the
attention output is linear in v, so v's rows can carry o_proj's 1/s.
"""
from __future__ import annotations

import torch

CALIBRATION_PROMPTS = 32


def smooth_mlps(model, tokenizer, alpha: float = 0.5):
    """Smooth `model`'s MLPs in place with migration strength `alpha` (the paper's 0.5)."""
    peaks = input_peaks(model, tokenizer, {"gate_proj": "mlp", "down_proj": "mlp"})
    with torch.no_grad():
        for index, layer in enumerate(model.model.layers):
            mlp = layer.mlp
            weights = torch.maximum(mlp.gate_proj.weight.abs().amax(0), mlp.up_proj.weight.abs().amax(0))
            scale = _scale(peaks["gate_proj"][index], weights, alpha)
            layer.post_attention_layernorm.weight.div_(scale)
            mlp.gate_proj.weight.mul_(scale)
            mlp.up_proj.weight.mul_(scale)
            scale = _scale(peaks["down_proj"][index], mlp.down_proj.weight.abs().amax(0), alpha)
            mlp.up_proj.weight.div_(scale[:, None])
            if mlp.up_proj.bias is not None:  # a row carries its bias (Llama's mlp_bias)
                mlp.up_proj.bias.div_(scale)
            mlp.down_proj.weight.mul_(scale)
    return model


def smooth_attention(model, tokenizer, alpha: float = 0.5):
    """Smooth the attention projections in place: q/k/v's input through the input RMSNorm's
    gain; o_proj's input through v's rows (one scale per v channel, shared by its query heads)."""
    peaks = input_peaks(model, tokenizer, {"q_proj": "self_attn", "o_proj": "self_attn"})
    with torch.no_grad():
        for index, layer in enumerate(model.model.layers):
            attn = layer.self_attn
            weights = torch.stack([p.weight.abs().amax(0) for p in (attn.q_proj, attn.k_proj, attn.v_proj)]).amax(0)
            scale = _scale(peaks["q_proj"][index], weights, alpha)
            layer.input_layernorm.weight.div_(scale)
            for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
                proj.weight.mul_(scale)
            kv_heads, head_dim = attn.config.num_key_value_heads, attn.head_dim
            group = attn.config.num_attention_heads // kv_heads  # o_proj channel (h, d) reads v channel (h // group, d)
            o_weights = attn.o_proj.weight.abs().amax(0).view(kv_heads, group, head_dim).amax(1).flatten()
            o_inputs = peaks["o_proj"][index].view(kv_heads, group, head_dim).amax(1).flatten()
            scale = _scale(o_inputs, o_weights, alpha)
            attn.v_proj.weight.div_(scale[:, None])
            if attn.v_proj.bias is not None:  # Qwen2's (and attention_bias Llamas') v bias scales with its row
                attn.v_proj.bias.div_(scale)
            attn.o_proj.weight.mul_(scale.view(kv_heads, 1, head_dim).expand(kv_heads, group, head_dim).flatten())
    return model


def input_peaks(model, tokenizer, modules: dict[str, str]) -> dict[str, dict[int, torch.Tensor]]:
    """Per layer, the largest |input| per channel of each named projection ("gate_proj" → "mlp")
    over the calibration prompts: instructions from the recovery set, none of them held out."""
    from models.generation import preprocess
    from optimize.prompts import TOPICS, prompts

    peaks: dict[str, dict[int, torch.Tensor]] = {name: {} for name in modules}

    def record(name: str, layer: int):
        def hook(module, args, output):
            peak = args[0].detach().abs().flatten(0, 1).amax(0)
            seen = peaks[name].get(layer)
            peaks[name][layer] = peak if seen is None else torch.maximum(seen, peak)
        return hook

    handles = [getattr(getattr(layer, parent), name).register_forward_hook(record(name, index))
               for index, layer in enumerate(model.model.layers) for name, parent in modules.items()]
    try:
        with torch.inference_mode():
            for prompt in prompts([], 2 * CALIBRATION_PROMPTS, topics=TOPICS)[:CALIBRATION_PROMPTS]:
                model(input_ids=preprocess(tokenizer, prompt))
    finally:
        for handle in handles:
            handle.remove()
    return peaks


def _scale(activation_peak: torch.Tensor, weight_peak: torch.Tensor, alpha: float) -> torch.Tensor:
    """s_j = max|X_j|^α / max|W_j|^(1−α), bounded so that no channel is scaled to nothing."""
    return (activation_peak.clamp(min=1e-5) ** alpha / weight_peak.clamp(min=1e-5) ** (1 - alpha)).clamp(1e-2, 1e2)
