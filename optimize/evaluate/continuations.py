"""Greedy decoding in left-padded batches, for PyTorch decoders: the references the gates compare
against, the reading and instruction sets' replies, and the teacher's answers that recovery learns
from all decode the same way. And the check that exact prompt lookup keeps an ONNX decoder's text."""
from __future__ import annotations

import logging

import torch

from models.runners import Runner

log = logging.getLogger(__name__)


def left_padded_prompts(tokenizer, prompts: list[str], pad_id: int) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """Chat-template prompts as one left-padded batch, so that every answer starts at the same column."""
    from models.generation import preprocess

    batch = [preprocess(tokenizer, p)[0] for p in prompts]
    length = max(len(ids) for ids in batch)
    ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, prompt_ids in enumerate(batch):
        ids[row, length - len(prompt_ids):], mask[row, length - len(prompt_ids):] = prompt_ids, 1
    return batch, ids, mask


def greedy_answers(model, tokenizer, prompts: list[str], new_tokens: int, batch_size: int, stops: set[int],
                   pad_id: int, bf16_on_cuda: bool = False, progress: str | None = None) -> list[torch.Tensor]:
    """Each prompt's greedy answer as a user turn, prompt included (1×L), cut after its first stop
    token. Left-padded batches: on two cores a 135M decoder reads its weights once per step for the
    whole batch (tests check the tokens against one prompt at a time)."""
    out = []
    on_gpu_bf16 = bf16_on_cuda and model.device.type == "cuda"
    for start in range(0, len(prompts), batch_size):
        batch, ids, mask = left_padded_prompts(tokenizer, prompts[start: start + batch_size], pad_id)
        with torch.inference_mode(), torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=on_gpu_bf16):
            generated = model.generate(input_ids=ids.to(model.device), attention_mask=mask.to(model.device),
                                       max_new_tokens=new_tokens, do_sample=False, use_cache=True, pad_token_id=pad_id).cpu()
        for row, prompt_ids in enumerate(batch):
            answer = generated[row, ids.shape[1]:]
            ends = [i for i, token in enumerate(answer.tolist()) if token in stops]
            out.append(torch.cat([prompt_ids, answer[: ends[0] + 1] if ends else answer])[None])
        if progress:
            log.info("%s %d/%d", progress, min(start + batch_size, len(prompts)), len(prompts))
    return out


def batched_torch_continuations(runner: Runner, prompts: list[str], new_tokens: int, batch_size: int) -> list[torch.Tensor]:
    stops = runner.model.generation_config.eos_token_id
    stops = set(stops if isinstance(stops, list) else [stops if stops is not None else runner.tokenizer.eos_token_id])
    pad_id = runner.tokenizer.eos_token_id if runner.tokenizer.eos_token_id is not None else 0
    return greedy_answers(runner.model, runner.tokenizer, prompts, new_tokens, batch_size, stops, pad_id)


def lookup_keeps_texts(runner: Runner, prompts: tuple[str, ...], new_tokens: int = 48) -> dict:
    """Exact prompt lookup promises the same text with drafts as without (models/decoding.py): each prompt decoded
    both ways on the decoder's own graph, end-of-sequence ignored so that every token counts. A weight kernel
    that rounds a wider pass differently from a one-row step breaks it (experiments/int8-block-size). Measured at
    every build, never read from a record: which kernel path a CPU takes decides it."""
    from models import generation

    decoder = runner.model.decoder
    lookup, identical = decoder.lookup, 0
    try:
        for prompt in prompts:
            decoder.lookup = None
            plain = generation.generate(runner, prompt, new_tokens, ignore_eos=True)["text"]
            decoder.lookup = lookup
            identical += generation.generate(runner, prompt, new_tokens, ignore_eos=True)["text"] == plain
    finally:
        decoder.lookup = lookup
    return {"lookup_prompts": len(prompts), "lookup_identical": identical}
