"""Extractive QA pre/post-processing, written once and used by every runner.

Long contexts are split into overlapping windows (document stride), never silently truncated.
The answer is the best span over all windows; SQuAD 2.0's null score (CLS start + CLS end)
decides "no answer": a span is returned only when it beats the null score by `null_threshold`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from models.errors import InputError

MAX_QUESTION_CHARS = 1_000
MAX_CONTEXT_CHARS = 200_000


@dataclass(frozen=True)
class QAConfig:
    max_length: int = 384
    stride: int = 128  # tokens shared by consecutive windows
    max_question_tokens: int = 64
    max_answer_tokens: int = 30
    top_k: int = 20
    null_threshold: float = 0.0  # tuned on validation articles at training time


@dataclass
class Windows:
    """Tokenised (question, context) windows, ready for any runner."""

    inputs: dict[str, np.ndarray]  # input_ids, attention_mask, token_type_ids: int64 [windows, tokens]
    offsets: list[list[tuple[int, int] | None]]  # per token: char span in the context, None outside it

    @property
    def num_tokens(self) -> int:
        return int(self.inputs["attention_mask"].sum())


@dataclass(frozen=True)
class Answer:
    answer: str  # "" = no answer
    score: float  # best span score minus null score (logit units); > null_threshold means answered
    start: int  # char offsets in the context; -1 when there is no answer
    end: int
    span: str  # best span even when the null score wins (for inspection and threshold tuning)


def validate(question: str, context: str) -> tuple[str, str]:
    question, context = (question or "").strip(), context or ""
    if not context.strip():
        raise InputError("Please enter a context paragraph to search for the answer.")
    if not question:
        raise InputError("Please enter a question about the context.")
    if len(question) > MAX_QUESTION_CHARS:
        raise InputError(f"The question is too long ({len(question):,} characters; at most {MAX_QUESTION_CHARS:,}).")
    if len(context) > MAX_CONTEXT_CHARS:
        raise InputError(f"The context is too long ({len(context):,} characters; at most {MAX_CONTEXT_CHARS:,}).")
    return question, context


def tokenize(tokenizer, questions: list[str], contexts: list[str], config: QAConfig, padding: bool = True):
    """The one tokenisation used for training, evaluation and serving (fast tokenizer, offsets)."""
    questions = [q.lstrip() for q in questions]
    return tokenizer(
        questions, contexts, truncation="only_second", max_length=config.max_length, stride=config.stride,
        return_overflowing_tokens=True, return_offsets_mapping=True,
        padding="longest" if padding else False, return_tensors="np" if padding else None,
    )


def preprocess(tokenizer, question: str, context: str, config: QAConfig) -> Windows:
    question, context = validate(question, context)
    question_ids = tokenizer(question, add_special_tokens=False)["input_ids"]
    if len(question_ids) > config.max_question_tokens:
        raise InputError(f"The question is too long ({len(question_ids)} tokens; at most {config.max_question_tokens}).")
    encoded = tokenize(tokenizer, [question], [context], config)
    offsets = []
    for window in range(len(encoded["input_ids"])):
        sequence_ids = encoded.sequence_ids(window)
        offsets.append([tuple(int(x) for x in span) if sid == 1 else None
                        for sid, span in zip(sequence_ids, encoded["offset_mapping"][window])])
    names = ("input_ids", "attention_mask", "token_type_ids")
    inputs = {name: encoded[name].astype(np.int64) for name in names if name in encoded}
    return Windows(inputs=inputs, offsets=offsets)


def best_span(start_logits: np.ndarray, end_logits: np.ndarray, offsets: list[tuple[int, int] | None],
              config: QAConfig) -> tuple[float, int, int]:
    """Best (score, start_token, end_token) in one window, restricted to context tokens."""
    best = (-np.inf, 0, 0)
    starts = np.argsort(start_logits)[::-1][: config.top_k]
    ends = np.argsort(end_logits)[::-1][: config.top_k]
    for s in starts:
        if offsets[s] is None:
            continue
        for e in ends:
            if e < s or e - s + 1 > config.max_answer_tokens or offsets[e] is None:
                continue
            value = float(start_logits[s] + end_logits[e])
            if value > best[0]:
                best = (value, int(s), int(e))
    return best


def postprocess(windows: Windows, start_logits: np.ndarray, end_logits: np.ndarray, context: str,
                config: QAConfig) -> Answer:
    """Best span over all windows against the smallest null score of any window (as SQuAD 2.0
    reference implementations do): the span must beat every window's "no answer"."""
    null_score = min(float(s[0] + e[0]) for s, e in zip(start_logits, end_logits))
    best_value, best_chars = -np.inf, (-1, -1)
    for window, offsets in enumerate(windows.offsets):
        value, s, e = best_span(start_logits[window], end_logits[window], offsets, config)
        if value > best_value:
            best_value, best_chars = value, (offsets[s][0], offsets[e][1]) if value > -np.inf else (-1, -1)
    if best_value == -np.inf:
        return Answer(answer="", score=-np.inf, start=-1, end=-1, span="")
    margin = best_value - null_score
    span = context[best_chars[0]:best_chars[1]]
    if margin > config.null_threshold:
        return Answer(answer=span, score=margin, start=best_chars[0], end=best_chars[1], span=span)
    return Answer(answer="", score=margin, start=-1, end=-1, span=span)


def answer(runner, question: str, context: str) -> dict:
    """Answer with `runner`, timing each stage; the dict is the `/qa` API's response."""
    config = runner.qa_config
    started = time.perf_counter()
    windows = preprocess(runner.tokenizer, question, context, config)
    tokenized = time.perf_counter()
    start_logits, end_logits = runner.qa_logits(windows.inputs)
    modelled = time.perf_counter()
    result = postprocess(windows, start_logits, end_logits, context, config)
    finished = time.perf_counter()
    return {
        "answer": result.answer, "score": round(float(result.score), 4), "start": result.start, "end": result.end,
        "windows": len(windows.offsets), "tokens": windows.num_tokens,
        "latency_ms": {
            "tokenize": 1e3 * (tokenized - started), "model": 1e3 * (modelled - tokenized),
            "post": 1e3 * (finished - modelled), "total": 1e3 * (finished - started),
        },
    }
