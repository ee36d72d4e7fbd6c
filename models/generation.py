"""Text generation pre/post-processing, written once for every runner: the model's chat
template in, greedy decoding with the KV cache, streamed detokenisation out, with time to first
token and tokens/s measured at the streamer (when each token leaves the model)."""
from __future__ import annotations

import queue
import threading
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from models.errors import InputError, typed_text

MAX_PROMPT_CHARS = 4_000
MAX_PROMPT_TOKENS = 2_048  # a demo's prompt: a longer prefill would hold every other visitor's click
MAX_NEW_TOKENS = 256


@dataclass
class Update:
    text: str  # decoded so far
    done: bool
    result: dict | None = None  # the `/generate` response, on the last update


def validate(prompt: str, max_new_tokens: int) -> tuple[str, int]:
    prompt = typed_text(prompt, "prompt").strip()
    if not "".join(c for c in prompt if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf")).strip():
        raise InputError("Please enter a prompt.")  # zero-width and control characters alone are no prompt either
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InputError(f"The prompt is too long ({len(prompt):,} characters; at most {MAX_PROMPT_CHARS:,}).")
    try:  # 3.7 is refused, not cut to 3: a count the caller did not ask for would be timed as theirs
        if isinstance(max_new_tokens, bool):  # int(True) is 1: a checkbox's value is not a count
            raise TypeError(max_new_tokens)
        whole = int(max_new_tokens)
        if not isinstance(max_new_tokens, int) and whole != float(max_new_tokens):  # 10**30 is whole, only too many
            raise ValueError(max_new_tokens)
    except (TypeError, ValueError, OverflowError) as error:
        raise InputError(f"max_new_tokens must be a whole number (got {max_new_tokens!r}).") from error
    max_new_tokens = whole
    if not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise InputError(f"max_new_tokens must be between 1 and {MAX_NEW_TOKENS}.")
    return prompt, max_new_tokens


def check_length(runner, prompt_tokens: int, max_new_tokens: int) -> None:
    """Characters do not bound tokens (4,000 CJK characters are ~12,000 SmolLM2 tokens): refuse a prompt the
    model cannot read whole, with its new tokens and the drafts prompt lookup checks past them."""
    if prompt_tokens > MAX_PROMPT_TOKENS:
        raise InputError(f"The prompt is too long ({prompt_tokens:,} tokens with the chat template; at most "
                         f"{MAX_PROMPT_TOKENS:,}).")
    lookup = getattr(_decoder(runner), "lookup", None)
    needed = prompt_tokens + max_new_tokens + (lookup.draft_tokens if lookup else 0)
    if runner.context_length and needed > runner.context_length:
        raise InputError(f"The prompt is {prompt_tokens:,} tokens with the chat template, and {runner.variant} reads at "
                         f"most {runner.context_length:,} positions: shorten it or ask for fewer new tokens.")


def _decoder(runner):
    """The ONNX decoding loop (models/decoding.GreedyDecoder) behind a runner; None for PyTorch."""
    return getattr(runner.model, "decoder", None)


def preprocess(tokenizer, prompt: str) -> torch.Tensor:
    """The prompt as one user turn of the model's chat template (plain text if it has none)."""
    typed_markup = any(token.content in prompt for token in tokenizer.added_tokens_decoder.values() if token.special)
    if tokenizer.chat_template:
        # a typed "<|im_start|>system" would open a real system turn inside the user's: such a prompt is
        # tokenised in parts, the template's markup as special tokens and the visitor's text as text
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": PLACEHOLDER}], add_generation_prompt=True,
                                                 tokenize=False)
        if typed_markup and rendered.count(PLACEHOLDER) == 1:
            before, after = rendered.split(PLACEHOLDER)
            ids = [*tokenizer(before, add_special_tokens=False).input_ids,
                   *tokenizer(prompt, add_special_tokens=False, split_special_tokens=True).input_ids,
                   *tokenizer(after, add_special_tokens=False).input_ids]
            return torch.tensor([ids])
        messages = [{"role": "user", "content": prompt}]
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    return tokenizer(prompt, return_tensors="pt", split_special_tokens=True).input_ids


PLACEHOLDER = "PROMPT_PLACEHOLDER_7f3a"  # where the user's text goes in the rendered template


def template_prefix(tokenizer) -> list[int]:
    """The tokens every prompt starts with (the chat template's system turn and the user tag):
    the longest common start of two different prompts."""
    first, second = (preprocess(tokenizer, text)[0].tolist() for text in ("Hi.", "What is 2 + 2?"))
    common = next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))
    return first[:common]


class Cancelled(Exception):
    """The stream was closed (the visitor left): raised in the decoding loop at its next token."""


class _TimedStreamer:
    """transformers streamer protocol: `put` gets the prompt once, then each new token. Once `cancelled`,
    `put` stops the model (both runtimes call it every step), so a closed stream frees the cores at once."""

    def __init__(self) -> None:
        self.tokens: queue.Queue = queue.Queue()
        self.prompt_seen = False
        self.cancelled = False

    def put(self, value: torch.Tensor) -> None:
        if self.cancelled:
            raise Cancelled()
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.tokens.put((time.perf_counter(), value.reshape(-1).tolist()))

    def end(self) -> None:
        self.tokens.put(None)


def stream(runner, prompt: str, max_new_tokens: int = 64, ignore_eos: bool = False) -> Iterator[Update]:
    """Yield the text as it grows; the last update carries the timings. `ignore_eos`: write exactly
    `max_new_tokens` (benches compare speeds on equal token counts)."""
    prompt, max_new_tokens = validate(prompt, max_new_tokens)
    tokenizer = runner.tokenizer
    started = time.perf_counter()
    input_ids = preprocess(tokenizer, prompt)
    check_length(runner, int(input_ids.shape[1]), max_new_tokens)
    tokenized = time.perf_counter()
    streamer = _TimedStreamer()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            runner.generate(input_ids, max_new_tokens, streamer=streamer, **({"ignore_eos": True} if ignore_eos else {}))
        except BaseException as error:  # re-raised in the caller's thread
            failure.append(error)
            streamer.end()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    new_ids: list[int] = []
    stamps: list[float] = []
    counts: list[int] = []  # tokens per stamp: a kept draft arrives as several at once
    try:
        while (item := streamer.tokens.get()) is not None:
            stamp, ids = item
            stamps.append(stamp)
            counts.append(len(ids))
            new_ids.extend(ids)
            # a character split across tokens decodes as U+FFFD until its last byte arrives: not shown meanwhile
            yield Update(text=tokenizer.decode(new_ids, skip_special_tokens=True).rstrip("\ufffd"), done=False)
    finally:  # closed early (the visitor left): stop the model, or the next visitor's timing waits behind it
        streamer.cancelled = True
        worker.join()
    if failure:
        raise failure[0]
    # ONNX decoders read the chat template's start from a cache: the prompt speed counts the tokens computed
    cached = getattr(_decoder(runner), "last_cached_prompt_tokens", 0)
    finished_model = stamps[-1] if stamps else time.perf_counter()
    post_started = time.perf_counter()
    # nor at the end, where the token budget ran out inside one (the stream had shown the text without it)
    text = tokenizer.decode(new_ids, skip_special_tokens=True).rstrip("\ufffd")
    finished = time.perf_counter()
    model_ms = 1e3 * (finished_model - tokenized)
    result = {
        "text": text,
        "new_tokens": len(new_ids),
        "prompt_tokens": int(input_ids.shape[1]),
        "ttft_ms": 1e3 * (stamps[0] - tokenized) if stamps else 0.0,
        "tokens_per_s": len(new_ids) / (model_ms / 1e3) if model_ms > 0 else 0.0,
        "cached_prompt_tokens": cached,
        **phase_speeds(int(input_ids.shape[1]) - cached, tokenized, stamps, counts),
        **draft_stats(runner),
        "latency_ms": {
            "tokenize": 1e3 * (tokenized - started),
            "model": model_ms,
            "post": 1e3 * (finished - post_started),  # the stream's decoding overlapped the model: not added
            "total": 1e3 * (finished - started),
        },
    }
    yield Update(text=text, done=True, result=result)


def phase_speeds(prompt_tokens: int, tokenized: float, stamps: list[float], counts: list[int] | None = None
                 ) -> dict[str, float]:
    """Prompt processing and decoding apart: the first token's wait is the prefill (`prompt_tokens`, the ones
    computed, in one pass), every later token is decoding (`counts`: tokens per stamp, several where a draft was
    kept). A speed over both mixes a prompt-bound and a bandwidth-bound phase, and one over different
    token counts is not a comparison."""
    counts = counts or [1] * len(stamps)
    prefill_s = stamps[0] - tokenized if stamps else 0.0
    decode_s = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    return {"prefill_tokens_per_s": prompt_tokens / prefill_s if prefill_s > 0 else 0.0,
            "decode_tokens_per_s": sum(counts[1:]) / decode_s if decode_s > 0 else 0.0}


def draft_stats(runner) -> dict:
    """Prompt lookup's drafts in this generation (ONNX decoders with lookup on): tokens drafted, kept,
    and the passes that checked them; the app and the bench show the acceptance rate beside tokens/s."""
    decoder = _decoder(runner)
    if decoder is None or getattr(decoder, "lookup", None) is None:
        return {}
    stats = dict(decoder.last_lookup)
    stats["acceptance"] = stats["accepted"] / stats["drafted"] if stats["drafted"] else 0.0
    return {"draft": stats}


def generate(runner, prompt: str, max_new_tokens: int = 64, ignore_eos: bool = False) -> dict:
    """The whole generation at once: the `/generate` API's response."""
    for update in stream(runner, prompt, max_new_tokens, ignore_eos):
        if update.done:
            return update.result
    raise RuntimeError("generation ended without a result")
