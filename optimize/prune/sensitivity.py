"""Which decoder layers' attention projections to keep in fp32 when the rest go INT8.

MatMulNBits at accuracy level 4 on every attention projection of SmolLM2 costs
greedy agreement, but fp32 attention weights are almost half the bytes read per token
(docs/measurements.md). The error adds up layer by layer
(the sum of the per-layer KLs matched the all-layer KL), so one layer at a time is emulated in
PyTorch — weights and activations rounded to int8 per block of the recipe's size, as the kernel does — and the
layers whose emulated error moves the next-token distribution most (KL on the model's own
continuations of calibration prompts, none held out) stay fp32.
"""
from __future__ import annotations

import torch

BLOCK = 16
CALIBRATION_PROMPTS = 4  # on the pruned SmolLM2, as few chose the same layers as 8 or 24, in half the time
CONTINUATION_TOKENS = 16


def fake_int8(x: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """Symmetric int8 per block of `block` along the last axis (a last, shorter block padded with zeros,
    as MatMulNBits pads K), returned dequantized."""
    padded = torch.nn.functional.pad(x, (0, -x.shape[-1] % block))
    blocks = padded.reshape(*x.shape[:-1], padded.shape[-1] // block, block)
    scale = blocks.abs().amax(-1, keepdim=True).clamp(min=1e-8) / 127
    return (torch.round(blocks / scale) * scale).reshape(padded.shape)[..., :x.shape[-1]]


def attention_sensitivity(model, tokenizer, block: int = BLOCK) -> list[float]:
    """Per layer, the mean KL(fp32 ‖ that layer's attention emulated in INT8) per token."""
    from models.generation import preprocess
    from optimize.prompts import TOPICS, prompts

    sequences = []
    with torch.inference_mode():
        for prompt in prompts([], 640, topics=TOPICS)[-CALIBRATION_PROMPTS:]:  # not the smoothing prompts (the first ones)
            ids = preprocess(tokenizer, prompt)
            sequences.append(model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                            max_new_tokens=CONTINUATION_TOKENS, pad_token_id=tokenizer.eos_token_id))
        references = [torch.log_softmax(model(input_ids=ids).logits.float(), -1) for ids in sequences]
    scores = []
    for layer in model.model.layers:
        attn = layer.self_attn
        projections = (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj)
        originals = [p.weight.data for p in projections]
        hooks = [p.register_forward_pre_hook(lambda module, args: (fake_int8(args[0], block), *args[1:])) for p in projections]
        for p in projections:
            p.weight.data = fake_int8(p.weight.data, block)
        try:
            with torch.inference_mode():
                kl = [(ref.exp() * (ref - torch.log_softmax(model(input_ids=ids).logits.float(), -1))).sum(-1).mean()
                      for ids, ref in zip(sequences, references)]
        finally:
            for hook in hooks:
                hook.remove()
            for p, weight in zip(projections, originals):
                p.weight.data = weight
        scores.append(float(torch.stack(kl).mean()))
    return scores


def most_sensitive(scores: list[float], share: float) -> list[int]:
    """The `share` of layers with the largest scores, in layer order."""
    count = round(share * len(scores))
    return sorted(sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)[:count])
